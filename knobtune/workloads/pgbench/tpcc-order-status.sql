-- TPC-C Order-Status (clause 2.6.1): a customer by last name (60%) or number; read only.
\set w random(1, :scale)
\set d random(1, 10)
\set c (((random(0, 1023) | random(1, 3000)) + 259) % 3000) + 1
\set name ((random(0, 255) | random(0, 999)) + 223) % 1000
\set by_name random(1, 100) <= 60
SELECT tpcc_order_status(:w, :d, :c, :name, :by_name);
