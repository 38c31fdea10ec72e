"""What a pgbench workload's data must hold after a run, and after a crash: its invariants and its ledger.

A workload names its check (``[drivers.pgbench] check``). The invariant is
one SQL query that answers ``ok`` when the data holds and otherwise says what
broke. The ledger is a table that gains exactly one row per committed
transaction of one script (or of every script): after a run it must have
grown by the commits pgbench saw, and after a crash by at least those it
acknowledged.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DataCheck:
    invariant: str  # SQL: one text value, 'ok' when the data holds; {records} is the workload's record count
    ledger: str | None = None  # a table that gains one row per committed transaction of ledger_script
    ledger_script: str | None = None  # the script (its file's stem) whose commits add them; None: every script

    def broken(self, answer: str) -> str | None:
        """What the invariant's answer says broke, or None when the data holds."""
        return None if answer == "ok" else answer


_TPCB = """
SELECT CASE WHEN a = t AND t = b AND b = h THEN 'ok'
            ELSE format('TPC-B invariant broken: sum(abalance)=%s, sum(tbalance)=%s, sum(bbalance)=%s, '
                        'sum(history.delta)=%s', a, t, b, h) END
FROM (SELECT (SELECT coalesce(sum(abalance), 0) FROM pgbench_accounts) AS a,
             (SELECT coalesce(sum(tbalance), 0) FROM pgbench_tellers) AS t,
             (SELECT coalesce(sum(bbalance), 0) FROM pgbench_branches) AS b,
             (SELECT coalesce(sum(delta), 0) FROM pgbench_history) AS h) AS sums
"""

# TPC-C's consistency conditions 1-4 (specification 5.11, clause 3.3.2), each over every warehouse or district.
_TPCC = """
SELECT coalesce(nullif(concat_ws('; ',
  (SELECT 'TPC-C condition 1 (W_YTD = sum(D_YTD)) broken in ' || count(*) || ' warehouse(s)' FROM warehouse
    WHERE w_ytd <> (SELECT sum(d_ytd) FROM district WHERE d_w_id = w_id) HAVING count(*) > 0),
  (SELECT 'TPC-C condition 2 (D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)) broken in ' || count(*) || ' district(s)'
    FROM district
    WHERE d_next_o_id - 1 <> (SELECT max(o_id) FROM orders WHERE o_w_id = d_w_id AND o_d_id = d_id)
       OR d_next_o_id - 1 <> (SELECT max(no_o_id) FROM new_order WHERE no_w_id = d_w_id AND no_d_id = d_id)
    HAVING count(*) > 0),
  (SELECT 'TPC-C condition 3 (max(NO_O_ID) - min(NO_O_ID) + 1 = new orders) broken in ' || count(*)
          || ' district(s)'
    FROM (SELECT max(no_o_id) - min(no_o_id) + 1 <> count(*) AS broken FROM new_order GROUP BY no_w_id, no_d_id) AS n
    WHERE broken HAVING count(*) > 0),
  (SELECT 'TPC-C condition 4 (sum(O_OL_CNT) = order lines) broken in ' || count(*) || ' district(s)'
    FROM (SELECT o_w_id AS w, o_d_id AS d, sum(o_ol_cnt) AS lines FROM orders GROUP BY 1, 2) AS o
    FULL JOIN (SELECT ol_w_id AS w, ol_d_id AS d, count(*) AS lines FROM order_line GROUP BY 1, 2) AS l USING (w, d)
    WHERE o.lines IS DISTINCT FROM l.lines HAVING count(*) > 0)), ''), 'ok')
"""

_ROWS = """
SELECT CASE WHEN n = {records} THEN 'ok' ELSE format('data loss: usertable holds %s of {records} records', n) END
FROM (SELECT count(*) AS n FROM usertable) AS c
"""

CHECKS: dict[str, DataCheck] = {
    # TPC-B: the balances agree; pgbench_history gains one row per transaction (pgbench's built-in script)
    "tpcb": DataCheck(_TPCB, ledger="pgbench_history"),
    # TPC-C: conditions 1-4; history gains one row per Payment
    "tpcc": DataCheck(_TPCC, ledger="history", ledger_script="tpcc-payment"),
    # YCSB: every record is still there (updates overwrite a field: no ledger)
    "rows": DataCheck(_ROWS),
}
