-- YCSB's usertable (CoreWorkload: a key and 10 fields of 100 bytes), :records rows, for pgbench's YCSB scripts.
-- Run with psql -v records=N. Field values are seeded text, so every load is the same.
DROP TABLE IF EXISTS usertable;
CREATE TABLE usertable (ycsb_key bigint PRIMARY KEY, field0 text, field1 text, field2 text, field3 text,
                        field4 text, field5 text, field6 text, field7 text, field8 text, field9 text);
INSERT INTO usertable
SELECT k, f, f, f, f, f, f, f, f, f, f
FROM (SELECT k, substr(repeat(md5(k::text), 4), 1, 100) AS f FROM generate_series(0, :records - 1) AS k) AS rows;
VACUUM ANALYZE usertable;
