// scanlog-demo: a small application that traces its own work with scan lengths, as docs/replay.md shows
// (tests/test_replay_scans.py captures and replays what it records).
//   scanlog-demo --db DIR --checkpoint DIR --trace FILE --scans FILE
// It fills a store with 1,000 keys ("msg-000000" .. "msg-000999", 100-byte values), takes a checkpoint, starts
// its scan log and RocksDB's trace, runs scans of known lengths through ScanLoggingDB (two threads, one of them in
// a second column family), ends both, and prints one JSON line: the Next and Prev calls it made after traced seeks.
#include <rocksdb/db.h>
#include <rocksdb/trace_reader_writer.h>
#include <rocksdb/utilities/checkpoint.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "scan_log.h"

namespace {

void check(const rocksdb::Status& s, const char* what) {
  if (!s.ok()) {
    std::cerr << "scanlog-demo: error: " << what << ": " << s.ToString() << std::endl;
    std::exit(1);
  }
}

std::string key_of(int i) {
  char text[16];
  std::snprintf(text, sizeof(text), "msg-%06d", i);
  return text;
}

struct Steps {
  uint64_t next = 0, prev = 0;
};

// Seek (or SeekForPrev) to `target`, then up to `limit` Next (or Prev) calls while the iterator is valid, as an
// application pages through a range.
void page(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, const std::string& target, bool backwards,
          uint64_t limit, Steps* steps, const std::string& upper_bound = "") {
  rocksdb::ReadOptions read;
  rocksdb::Slice upper(upper_bound);
  if (!upper_bound.empty()) read.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(read, cf));
  if (backwards) it->SeekForPrev(target);
  else it->Seek(target);
  for (uint64_t taken = 0; taken < limit && it->Valid(); ++taken) {
    if (backwards) {
      it->Prev();
      ++steps->prev;
    } else {
      it->Next();
      ++steps->next;
    }
  }
  check(it->status(), "a scan");
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i] + 2] = argv[i + 1];
  for (const char* required : {"db", "checkpoint", "trace", "scans"})
    if (!args.count(required)) {
      std::cerr << "usage: scanlog-demo --db DIR --checkpoint DIR --trace FILE --scans FILE" << std::endl;
      return 2;
    }
  rocksdb::Options options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> families{{rocksdb::kDefaultColumnFamilyName, options},
                                                        {"mail", options}};
  std::vector<rocksdb::ColumnFamilyHandle*> cfs;
  rocksdb::DB* raw = nullptr;
  check(rocksdb::DB::Open(rocksdb::DBOptions(options), args["db"], families, &cfs, &raw), "open");
  scanlog::ScanLog scans;
  auto db = std::make_unique<scanlog::ScanLoggingDB>(raw, &scans);  // the application's store, its iterators logged
  const std::string value(100, 'v');
  for (int i = 0; i < 1000; ++i)
    for (auto* cf : cfs) check(db->Put(rocksdb::WriteOptions(), cf, key_of(i), value), "put");
  check(db->Flush(rocksdb::FlushOptions(), cfs), "flush");

  rocksdb::Checkpoint* taker = nullptr;
  check(rocksdb::Checkpoint::Create(db.get(), &taker), "checkpoint");
  check(taker->CreateCheckpoint(args["checkpoint"]), "checkpoint");
  delete taker;
  std::unique_ptr<rocksdb::TraceWriter> writer;
  check(rocksdb::NewFileTraceWriter(db->GetEnv(), rocksdb::EnvOptions(), args["trace"], &writer), "trace writer");
  check(scans.Start(args["scans"]), "scan log");  // the scan log first, then the trace: no traced seek is missed
  check(db->StartTrace(rocksdb::TraceOptions(), std::move(writer)), "start trace");

  Steps main_steps, mail_steps;
  std::thread mail([&] {  // a second thread, in the second column family, at the same time
    for (uint64_t limit : {0, 1, 20, 500}) page(db.get(), cfs[1], key_of(900), true, limit, &mail_steps);
  });
  for (uint64_t limit : {0, 1, 20, 500}) page(db.get(), cfs[0], key_of(100), false, limit, &main_steps);
  for (uint64_t limit : {0, 1, 20, 500}) page(db.get(), cfs[0], key_of(900), true, limit, &main_steps);
  page(db.get(), cfs[0], key_of(990), false, 50, &main_steps);             // runs out after 10: the end of the keys
  page(db.get(), cfs[0], key_of(200), false, 20, &main_steps, key_of(205));  // runs out after 5: the upper bound
  page(db.get(), cfs[0], key_of(5), true, 20, &main_steps);                // runs out after 6: the first key
  page(db.get(), cfs[0], key_of(300), false, 3, &main_steps);              // the same seek twice, two lengths
  page(db.get(), cfs[0], key_of(300), false, 7, &main_steps);
  {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {}  // SeekToFirst is not traced: neither is this scan
  }
  check(db->Put(rocksdb::WriteOptions(), key_of(1000), value), "put");
  mail.join();

  check(db->EndTrace(), "end trace");
  check(scans.End(), "end scan log");
  for (auto* cf : cfs) check(db->DestroyColumnFamilyHandle(cf), "close");
  std::cout << "{\"next\": " << main_steps.next + mail_steps.next << ", \"prev\": "
            << main_steps.prev + mail_steps.prev << "}" << std::endl;
  return 0;
}
