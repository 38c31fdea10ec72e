-- YCSB read: one record by key. Keys: a zipfian draw (pgbench allows a parameter >= 1.001; YCSB's is 0.99)
-- spread over the key space by permute(), as YCSB's scrambled zipfian spreads hot keys.
\set key permute(random_zipfian(0, :records - 1, 1.001), :records)
SELECT * FROM usertable WHERE ycsb_key = :key;
