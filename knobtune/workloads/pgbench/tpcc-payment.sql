-- TPC-C Payment (clause 2.5.1): 15% of customers from another warehouse (when there is one), 60% named
-- by last name (NURand(255, 0, 999) with the run's C = 223), the rest by number; 1.00..5,000.00.
\set w random(1, :scale)
\set d random(1, 10)
\set remote :scale > 1 and random(1, 100) <= 15
\set cw case when :remote then 1 + (:w - 1 + random(1, greatest(:scale - 1, 1))) % :scale else :w end
\set cd case when :remote then random(1, 10) else :d end
\set c (((random(0, 1023) | random(1, 3000)) + 259) % 3000) + 1
\set name ((random(0, 255) | random(0, 999)) + 223) % 1000
\set by_name random(1, 100) <= 60
\set cents random(100, 500000)
SELECT tpcc_payment(:w, :d, :cw, :cd, :c, :name, :by_name, :cents / 100.0);
