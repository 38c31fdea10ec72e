-- TPC-C Stock-Level (clause 2.8.1): items of a district's last 20 orders below a threshold of 10..20.
\set w random(1, :scale)
\set d random(1, 10)
\set threshold random(10, 20)
SELECT tpcc_stock_level(:w, :d, :threshold);
