// pgreplay-kt: replays a PostgreSQL capture (knobtune's compact form of a server's log) against a server.
//
// Every captured session runs on its own connection in its own thread, its statements in their captured
// order; no session ever waits for another's statement (pgreplay-go's design: one goroutine per session;
// Debian's pgreplay 1.2.0 drives every session from one thread and hangs when one session blocks on a lock
// another holds while that one waits to be sent its next statement). Prepared statements are prepared once per
// session and executed with their captured parameters (text format, types inferred by the server).
//
//   --pace captured : each session connects and sends each statement at its captured offset from the start (or
//                     as soon as its previous statement ends, when late: the lag is recorded); --speed S divides
//                     every offset by S (2: the capture's work in half its time)
//   --pace think    : as fast, but each session waits its captured think time before each statement (the gap
//                     between its previous statement's end and this one's start in the capture: the client's own
//                     work), so a faster server shortens only the server's part, as it would for the application
//   --pace fast     : each session sends its statements back to back; a session starts once every session that
//                     had ended before it began in the capture has ended here (never one it overlapped)
//
// Input (``--capture``): "KTREPLAY 1\n" or "KTREPLAY 2\n", then "S <index> <start_us> <end_us> <dblen>\n<db>\n" per
// session, then "Q <session> <start_us> <kind s|p|u> <namelen> <textlen> <nparams>\n<name><text>" per statement in
// captured start order, each parameter "<len>\n<bytes>" (len -1: NULL). ``--limit N`` replays the first N.
// Version 2 adds, after a statement, the values the server generates and the application uses again
// (knobtune/systems/postgresql/generated.py finds them):
//   "G <column> <nslots> <tablelen>\n<table>" then "<slot> <captured>\n" per slot: the statement returns keys of
//       <table> in result column <column>; row i fills slot i (the value the replay's server generated);
//   "M <param> <slot>\n": send parameter <param> (0-based) as the slot's value;
//   "L <start> <end> <slot>\n": replace the text's bytes [start, end) (an integer literal) by the slot's value;
//   "F <sqlstate>\n": the statement failed in the capture too (read by knobtune, ignored here);
//   "T <think_us>\n": the session's think time before the statement (``--pace think`` waits it).
// A slot is the generating session's at once, and another session's once the generating session's transaction
// has ended (it waits for that, at most --wait-s seconds; then, or when the generator returned no such row, the
// captured value is sent).
// Output: one JSON line on stdout (counts, latency percentiles in µs, lag in ms, its own CPU seconds, values
// remapped); ``--failures FILE`` gets "<statement index> <sqlstate>" per failed statement; ``--ids FILE`` gets
// "<table>\t<replayed key>\t<label>" per key a generator returned (label: the captured value of a claimed row, or
// "g<statement>.<row>").
#include <libpq-fe.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Reference {
  long param = -1;  // or a literal's byte span [start, end) in the text
  long start = 0, end = 0;
  long slot = 0;
};

struct Statement {
  long index = 0;
  long start_us = 0;
  char kind = 's';
  std::string name, text;
  std::vector<std::string> params;
  std::vector<bool> nulls;
  long think_us = 0;     // the client's time before it in the capture (--pace think)
  long gen_column = -1;  // >= 0: a generator of keys of gen_table
  std::string gen_table;
  std::vector<long> gen_slots;
  std::vector<Reference> refs;
};

struct Slot {
  std::string captured, value;  // value: what the replay's server returned (empty: not yet, or no such row)
  int session = -1;             // the generating session's index
  bool published = false;       // other sessions may read it
};

struct Session {
  int index = 0;
  long start_us = 0, end_us = 0;
  std::string db;
  std::vector<Statement> statements;
};

struct Result {  // one statement's outcome, written by its session's thread only
  long latency_us = -1;
  long lag_us = 0;
  std::string sqlstate;  // empty: it succeeded
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "pgreplay-kt: %s\n", what.c_str());
  std::exit(2);
}

bool read_exact(std::FILE* f, std::string& out, long n) {
  out.resize(static_cast<size_t>(n));
  return n == 0 || std::fread(&out[0], 1, static_cast<size_t>(n), f) == static_cast<size_t>(n);
}

std::vector<Session> load(const char* path, long limit, long* count, std::vector<Slot>* slots) {
  std::FILE* f = std::fopen(path, "rb");
  if (!f) die(std::string("cannot open ") + path);
  char line[256];
  if (!std::fgets(line, sizeof line, f) || (std::strcmp(line, "KTREPLAY 1\n") != 0 && std::strcmp(line, "KTREPLAY 2\n") != 0))
    die("not a replay file (KTREPLAY 1 or 2)");
  std::vector<Session> sessions;
  long n = 0;
  Statement* last = nullptr;
  while (std::fgets(line, sizeof line, f)) {
    if (line[0] == 'G' || line[0] == 'M' || line[0] == 'L' || line[0] == 'F' || line[0] == 'T') {
      if (!last) die("a G, M, L, F or T line before any statement");
      if (line[0] == 'T' && (std::sscanf(line, "T %ld", &last->think_us) != 1 || last->think_us < 0)) die("bad T line");
      if (line[0] == 'G') {
        long nslots = 0, tablelen = 0;
        if (std::sscanf(line, "G %ld %ld %ld", &last->gen_column, &nslots, &tablelen) != 3) die("bad G line");
        if (!read_exact(f, last->gen_table, tablelen)) die("truncated G line");
        for (long i = 0; i < nslots; ++i) {
          long slot = 0;
          char captured[64];
          if (!std::fgets(line, sizeof line, f) || std::sscanf(line, "%ld %63s", &slot, captured) != 2 || slot < 0)
            die("bad slot line");
          if (static_cast<size_t>(slot) >= slots->size()) slots->resize(static_cast<size_t>(slot) + 1);
          (*slots)[static_cast<size_t>(slot)].captured = captured;
          last->gen_slots.push_back(slot);
        }
      } else if (line[0] == 'M' || line[0] == 'L') {
        Reference r;
        const bool ok = line[0] == 'M' ? std::sscanf(line, "M %ld %ld", &r.param, &r.slot) == 2
                                       : std::sscanf(line, "L %ld %ld %ld", &r.start, &r.end, &r.slot) == 3;
        if (!ok || r.slot < 0 || r.end < r.start || r.end > static_cast<long>(last->text.size()) ||
            r.param >= static_cast<long>(last->params.size()))
          die("bad M or L line");
        last->refs.push_back(r);
      }
      continue;
    }
    last = nullptr;
    if (line[0] == 'S') {
      Session s;
      long dblen = 0;
      if (std::sscanf(line, "S %d %ld %ld %ld", &s.index, &s.start_us, &s.end_us, &dblen) != 4) die("bad session line");
      std::string db;
      if (!read_exact(f, s.db, dblen) || std::fgetc(f) != '\n') die("truncated session line");
      if (s.index != static_cast<int>(sessions.size())) die("sessions out of order");
      sessions.push_back(std::move(s));
    } else if (line[0] == 'Q') {
      if (n >= limit) break;
      Statement q;
      int session = 0, nparams = 0;
      long namelen = 0, textlen = 0;
      if (std::sscanf(line, "Q %d %ld %c %ld %ld %d", &session, &q.start_us, &q.kind, &namelen, &textlen, &nparams) != 6)
        die("bad statement line");
      if (session < 0 || session >= static_cast<int>(sessions.size())) die("statement of an unknown session");
      if (!read_exact(f, q.name, namelen) || !read_exact(f, q.text, textlen)) die("truncated statement");
      for (int i = 0; i < nparams; ++i) {
        long len = 0;
        if (!std::fgets(line, sizeof line, f) || std::sscanf(line, "%ld", &len) != 1) die("bad parameter");
        std::string value;
        if (len >= 0 && !read_exact(f, value, len)) die("truncated parameter");
        q.params.push_back(std::move(value));
        q.nulls.push_back(len < 0);
      }
      q.index = n++;
      sessions[static_cast<size_t>(session)].statements.push_back(std::move(q));
      last = &sessions[static_cast<size_t>(session)].statements.back();
    } else {
      die("unknown line in the replay file");
    }
  }
  std::fclose(f);
  *count = n;
  sessions.erase(std::remove_if(sessions.begin(), sessions.end(),
                                [](const Session& s) { return s.statements.empty(); }),
                 sessions.end());
  return sessions;
}

// A libpq connection-string value: single-quoted, its quotes and backslashes escaped.
std::string quoted(const std::string& value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string sqlstate_of(const PGresult* r) {
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  return state && *state ? state : "XX000";
}

// Runs one statement to completion (all results drained); its SQLSTATE on failure, else "". ``params`` and ``text``
// are the statement's own or, where it sends a generated value, the replay's. A generator's keys (its result
// column ``q.gen_column``, by row) go to ``returned``.
std::string execute(PGconn* conn, const Statement& q, const std::string& text, const std::vector<std::string>& params,
                    std::map<std::string, std::string>& prepared, std::vector<std::string>* returned) {
  std::vector<const char*> values;
  for (size_t i = 0; i < params.size(); ++i) values.push_back(q.nulls[i] ? nullptr : params[i].c_str());
  const int n = static_cast<int>(values.size());
  if (q.kind == 'p') {
    auto found = prepared.find(q.name);
    if (found == prepared.end() || found->second != q.text) {
      if (found != prepared.end()) {
        PGresult* d = PQexec(conn, ("DEALLOCATE \"" + q.name + "\"").c_str());
        PQclear(d);
      }
      PGresult* p = PQprepare(conn, q.name.c_str(), q.text.c_str(), 0, nullptr);
      const bool ok = PQresultStatus(p) == PGRES_COMMAND_OK;
      std::string state = ok ? "" : sqlstate_of(p);
      PQclear(p);
      if (!ok) return state;
      prepared[q.name] = q.text;
    }
  }
  int sent = q.kind == 'p'   ? PQsendQueryPrepared(conn, q.name.c_str(), n, values.data(), nullptr, nullptr, 0)
             : q.kind == 'u' ? PQsendQueryParams(conn, text.c_str(), n, nullptr, values.data(), nullptr, nullptr, 0)
                             : PQsendQuery(conn, text.c_str());
  if (!sent) return PQstatus(conn) == CONNECTION_OK ? "XX000" : "08006";
  std::string state;
  while (PGresult* r = PQgetResult(conn)) {
    const ExecStatusType status = PQresultStatus(r);
    if (status == PGRES_COPY_IN) {  // a COPY FROM STDIN: its data is not in the log; end it empty
      PQputCopyEnd(conn, nullptr);
    } else if (status == PGRES_COPY_OUT) {
      char* buffer = nullptr;
      while (PQgetCopyData(conn, &buffer, 0) > 0) PQfreemem(buffer);
    } else if ((status == PGRES_FATAL_ERROR || status == PGRES_NONFATAL_ERROR) && state.empty()) {
      state = sqlstate_of(r);
    } else if (status == PGRES_TUPLES_OK && returned && returned->empty() && q.gen_column < PQnfields(r)) {
      for (int row = 0; row < PQntuples(r); ++row)
        returned->push_back(PQgetisnull(r, row, static_cast<int>(q.gen_column)) ? "" : PQgetvalue(r, row, static_cast<int>(q.gen_column)));
    }
    PQclear(r);
  }
  if (state.empty() && PQstatus(conn) != CONNECTION_OK) state = "08006";
  return state;
}

struct Replay {
  std::string conninfo;
  bool paced = true;
  bool think = false;  // --pace think: each session waits its captured think time before each statement
  double speed = 1.0;
  Clock::time_point start;
  std::chrono::milliseconds wait_limit{60000};
  std::vector<Result> results;  // by statement index
  std::atomic<long> connect_failures{0};
  // fast pace: sessions ordered by captured end; a session starts once the first ``needed`` of them have ended
  std::vector<long> end_rank;  // session position -> its rank by captured end
  std::vector<char> ended;     // by rank
  long ended_prefix = 0;
  long live = 0;  // sessions started and not yet ended
  std::mutex mutex;
  std::condition_variable changed;
  // generated values: slots filled by their session's generators, published when its transaction ends
  std::vector<Slot> slots;
  std::vector<std::string> ids;  // "<table>\t<replayed>\t<label>" lines
  std::atomic<long> remapped{0}, unfilled{0}, wait_timeouts{0};

  void finished(size_t position) {
    std::lock_guard<std::mutex> lock(mutex);
    --live;
    ended[static_cast<size_t>(end_rank[position])] = 1;
    while (ended_prefix < static_cast<long>(ended.size()) && ended[static_cast<size_t>(ended_prefix)]) ++ended_prefix;
    changed.notify_all();
  }

  void wait_for_prefix(long needed) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return ended_prefix >= needed; });
  }

  void publish(std::vector<long>& pending) {
    if (pending.empty()) return;
    std::lock_guard<std::mutex> lock(mutex);
    for (long slot : pending) slots[static_cast<size_t>(slot)].published = true;
    pending.clear();
    changed.notify_all();
  }

  // The value session ``session`` sends for ``slot``: its own generator's at once, another's once published (waiting
  // at most wait_limit); the captured value when the generator returned none.
  std::string value_of(long slot, int session) {
    Slot& s = slots[static_cast<size_t>(slot)];
    if (s.session != session) {
      std::unique_lock<std::mutex> lock(mutex);
      if (!changed.wait_for(lock, wait_limit, [&] { return s.published; })) {
        ++wait_timeouts;
        return s.captured;
      }
    }
    if (s.value.empty()) {
      ++unfilled;
      return s.captured;
    }
    ++remapped;
    return s.value;
  }

  void run_session(const Session& s, int session) {
    PGconn* conn = PQconnectdb((conninfo + " dbname=" + quoted(s.db)).c_str());
    const bool connected = PQstatus(conn) == CONNECTION_OK;
    if (!connected) ++connect_failures;
    std::map<std::string, std::string> prepared;
    std::vector<long> pending;  // slots this session filled, not yet published
    std::vector<std::string> ids;
    for (const Statement& q : s.statements) {
      Result& result = results[static_cast<size_t>(q.index)];
      std::vector<std::string> params = q.params;
      std::string text = q.text;
      std::vector<const Reference*> literals;
      for (const Reference& r : q.refs) {
        if (r.param >= 0) params[static_cast<size_t>(r.param)] = value_of(r.slot, session);
        else literals.push_back(&r);
      }
      std::sort(literals.begin(), literals.end(), [](const Reference* a, const Reference* b) { return a->start > b->start; });
      for (const Reference* r : literals)
        text.replace(static_cast<size_t>(r->start), static_cast<size_t>(r->end - r->start), value_of(r->slot, session));
      const Clock::time_point due = start + std::chrono::microseconds(static_cast<long>(static_cast<double>(q.start_us) / speed));
      if (paced) std::this_thread::sleep_until(due);
      if (think && q.think_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(q.think_us));
      const Clock::time_point sent = Clock::now();
      if (paced) result.lag_us = std::max<long>(0, std::chrono::duration_cast<std::chrono::microseconds>(sent - due).count());
      std::vector<std::string> returned;
      result.sqlstate = connected ? execute(conn, q, text, params, prepared, q.gen_column >= 0 ? &returned : nullptr) : "08006";
      result.latency_us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - sent).count();
      for (size_t row = 0; row < returned.size(); ++row) {
        const bool claimed = row < q.gen_slots.size();
        if (claimed) slots[static_cast<size_t>(q.gen_slots[row])].value = returned[row];
        if (!returned[row].empty())
          ids.push_back(q.gen_table + "\t" + returned[row] + "\t" +
                        (claimed ? slots[static_cast<size_t>(q.gen_slots[row])].captured
                                 : "g" + std::to_string(q.index) + "." + std::to_string(row)));
      }
      pending.insert(pending.end(), q.gen_slots.begin(), q.gen_slots.end());
      if (!connected || PQtransactionStatus(conn) == PQTRANS_IDLE) publish(pending);
    }
    PQfinish(conn);
    publish(pending);
    std::lock_guard<std::mutex> lock(mutex);
    this->ids.insert(this->ids.end(), ids.begin(), ids.end());
  }
};

long percentile(std::vector<long>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t at = static_cast<size_t>(q * static_cast<double>(sorted.size()));
  return sorted[std::min(at, sorted.size() - 1)];
}

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  umask(077);  // what it writes (the keys the replay made, the failed statements) is as private as the capture
  const char* capture = nullptr;
  const char* failures = nullptr;
  const char* ids = nullptr;
  double wait_s = 60, speed = 1;
  std::string host, user = "bench", pace = "captured";
  long limit = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--capture") capture = argv[i + 1];
    else if (flag == "--host") host = argv[i + 1];
    else if (flag == "--user") user = argv[i + 1];
    else if (flag == "--pace") pace = argv[i + 1];
    else if (flag == "--limit") limit = std::atol(argv[i + 1]);
    else if (flag == "--failures") failures = argv[i + 1];
    else if (flag == "--ids") ids = argv[i + 1];
    else if (flag == "--wait-s") wait_s = std::atof(argv[i + 1]);
    else if (flag == "--speed") speed = std::atof(argv[i + 1]);
    else die("unknown flag " + flag);
  }
  if (!capture || host.empty() || (pace != "captured" && pace != "fast" && pace != "think") || !(speed > 0))
    die("usage: pgreplay-kt --capture FILE --host SOCKDIR [--user U] [--pace captured|think|fast] [--limit N] [--failures F] [--ids F] [--wait-s S] [--speed S]");
  long count = 0;
  Replay replay;
  const std::vector<Session> sessions = load(capture, limit < 0 ? (1L << 62) : limit, &count, &replay.slots);
  for (Slot& slot : replay.slots) slot.published = true;  // a slot no loaded statement generates: its captured value
  for (size_t position = 0; position < sessions.size(); ++position)
    for (const Statement& q : sessions[position].statements)
      for (long slot : q.gen_slots) {
        replay.slots[static_cast<size_t>(slot)].session = static_cast<int>(position);
        replay.slots[static_cast<size_t>(slot)].published = false;
      }
  replay.wait_limit = std::chrono::milliseconds(static_cast<long>(wait_s * 1000));
  replay.conninfo = "host=" + quoted(host) + " user=" + quoted(user) + " application_name='knobtune-replay'";
  replay.paced = pace == "captured";
  replay.think = pace == "think";
  replay.speed = speed;
  replay.results.resize(static_cast<size_t>(count));
  std::vector<size_t> by_end(sessions.size());
  for (size_t i = 0; i < by_end.size(); ++i) by_end[i] = i;
  std::stable_sort(by_end.begin(), by_end.end(),
                   [&](size_t a, size_t b) { return sessions[a].end_us < sessions[b].end_us; });
  replay.end_rank.resize(sessions.size());
  for (size_t rank = 0; rank < by_end.size(); ++rank) replay.end_rank[by_end[rank]] = static_cast<long>(rank);
  replay.ended.assign(sessions.size(), 0);
  std::vector<long> ends;
  for (size_t i : by_end) ends.push_back(sessions[i].end_us);

  // Sessions are in captured start order: the launcher starts each at its time (captured pace) or once those that
  // had ended before it began have ended (fast: monotone, so launching in order never delays a ready session).
  replay.start = Clock::now();
  for (size_t position = 0; position < sessions.size(); ++position) {
    const Session& s = sessions[position];
    if (replay.paced) {
      const long due_us = static_cast<long>(static_cast<double>(s.statements.front().start_us) / replay.speed);
      std::this_thread::sleep_until(replay.start + std::chrono::microseconds(std::max(0L, due_us - 1000)));
    } else {
      const long needed = std::lower_bound(ends.begin(), ends.end(), s.start_us) - ends.begin();
      replay.wait_for_prefix(needed);
    }
    {
      std::lock_guard<std::mutex> lock(replay.mutex);
      ++replay.live;
    }
    std::thread([&replay, &s, position] {  // detached: an ended session's thread is gone, however many follow
      replay.run_session(s, static_cast<int>(position));
      replay.finished(position);
    }).detach();
  }
  {
    std::unique_lock<std::mutex> lock(replay.mutex);
    replay.changed.wait(lock, [&] { return replay.live == 0; });
  }
  const double elapsed_s = std::chrono::duration<double>(Clock::now() - replay.start).count();

  std::vector<long> latencies, lags;
  long errors = 0;
  double total_us = 0;
  std::unique_ptr<std::ofstream> failed;
  if (failures) failed = std::make_unique<std::ofstream>(failures);
  for (size_t i = 0; i < replay.results.size(); ++i) {
    const Result& r = replay.results[i];
    latencies.push_back(r.latency_us);
    lags.push_back(r.lag_us);
    total_us += static_cast<double>(r.latency_us);
    if (!r.sqlstate.empty()) {
      ++errors;
      if (failed) *failed << i << ' ' << r.sqlstate << '\n';
    }
  }
  if (ids) {
    std::ofstream out(ids);
    for (const std::string& line : replay.ids) out << line << '\n';
  }
  std::sort(latencies.begin(), latencies.end());
  std::sort(lags.begin(), lags.end());
  std::printf("{\"statements\": %ld, \"sessions\": %zu, \"errors\": %ld, \"connect_failures\": %ld, "
              "\"elapsed_s\": %.6f, \"p50_us\": %ld, \"p99_us\": %ld, \"p999_us\": %ld, \"max_us\": %ld, "
              "\"mean_us\": %.1f, \"lag_p99_ms\": %.3f, \"lag_max_ms\": %.3f, \"cpu_s\": %.4f, \"remapped\": %ld, \"unfilled\": %ld, "
              "\"wait_timeouts\": %ld}\n",
              count, sessions.size(), errors, replay.connect_failures.load(), elapsed_s, percentile(latencies, 0.5),
              percentile(latencies, 0.99), percentile(latencies, 0.999), latencies.empty() ? 0 : latencies.back(),
              latencies.empty() ? 0.0 : total_us / static_cast<double>(latencies.size()), percentile(lags, 0.99) / 1e3,
              lags.empty() ? 0.0 : static_cast<double>(lags.back()) / 1e3, cpu_seconds(), replay.remapped.load(),
              replay.unfilled.load(), replay.wait_timeouts.load());
  return 0;
}
