-- YCSB update: one field of one record, the key drawn as in ycsb-read.sql.
\set key permute(random_zipfian(0, :records - 1, 1.001), :records)
UPDATE usertable SET field0 = md5(random()::text) WHERE ycsb_key = :key;
