-- TPC-C New-Order (clause 2.4.1): a terminal of a random warehouse and district; the customer
-- NURand(1023, 1, 3000) with C = 259; 5..15 lines; 1 in 100 rolls back on an unused item.
\set w random(1, :scale)
\set d random(1, 10)
\set c (((random(0, 1023) | random(1, 3000)) + 259) % 3000) + 1
\set ol_cnt random(5, 15)
\set rbk random(1, 100) = 1
SELECT tpcc_new_order(:w, :d, :c, :ol_cnt, :rbk, :scale);
