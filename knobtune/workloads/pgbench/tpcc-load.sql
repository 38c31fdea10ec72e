-- TPC-C (TPC Benchmark C, Standard Specification 5.11): the nine tables, their initial population
-- for :scale warehouses (clause 4.3.3.1) and the five transactions as server-side functions
-- (tpcc-functions.sql, run after this file). Run with psql -v scale=N -v records=N.
-- Where this departs from the specification: docs/workloads.md (TPC-C).
SELECT setseed(0.42);  -- the same data on every load

DROP TABLE IF EXISTS warehouse, district, customer, history, new_order, orders, order_line, item, stock CASCADE;

CREATE TABLE warehouse (
  w_id int PRIMARY KEY, w_name varchar(10), w_street_1 varchar(20), w_street_2 varchar(20), w_city varchar(20),
  w_state char(2), w_zip char(9), w_tax numeric(4, 4), w_ytd numeric(12, 2));
CREATE TABLE district (
  d_w_id int, d_id int, d_name varchar(10), d_street_1 varchar(20), d_street_2 varchar(20), d_city varchar(20),
  d_state char(2), d_zip char(9), d_tax numeric(4, 4), d_ytd numeric(12, 2), d_next_o_id int,
  PRIMARY KEY (d_w_id, d_id));
CREATE TABLE customer (
  c_w_id int, c_d_id int, c_id int, c_first varchar(16), c_middle char(2), c_last varchar(16),
  c_street_1 varchar(20), c_street_2 varchar(20), c_city varchar(20), c_state char(2), c_zip char(9),
  c_phone char(16), c_since timestamp, c_credit char(2), c_credit_lim numeric(12, 2), c_discount numeric(4, 4),
  c_balance numeric(12, 2), c_ytd_payment numeric(12, 2), c_payment_cnt int, c_delivery_cnt int,
  c_data varchar(500), PRIMARY KEY (c_w_id, c_d_id, c_id));
CREATE TABLE history (
  h_c_id int, h_c_d_id int, h_c_w_id int, h_d_id int, h_w_id int, h_date timestamp, h_amount numeric(6, 2),
  h_data varchar(24));
CREATE TABLE new_order (no_w_id int, no_d_id int, no_o_id int, PRIMARY KEY (no_w_id, no_d_id, no_o_id));
CREATE TABLE orders (
  o_w_id int, o_d_id int, o_id int, o_c_id int, o_entry_d timestamp, o_carrier_id int, o_ol_cnt int,
  o_all_local int, PRIMARY KEY (o_w_id, o_d_id, o_id));
CREATE TABLE order_line (
  ol_w_id int, ol_d_id int, ol_o_id int, ol_number int, ol_i_id int, ol_supply_w_id int, ol_delivery_d timestamp,
  ol_quantity int, ol_amount numeric(6, 2), ol_dist_info char(24), PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number));
CREATE TABLE item (i_id int PRIMARY KEY, i_im_id int, i_name varchar(24), i_price numeric(5, 2), i_data varchar(50));
CREATE TABLE stock (
  s_w_id int, s_i_id int, s_quantity int, s_dist_01 char(24), s_dist_02 char(24), s_dist_03 char(24),
  s_dist_04 char(24), s_dist_05 char(24), s_dist_06 char(24), s_dist_07 char(24), s_dist_08 char(24),
  s_dist_09 char(24), s_dist_10 char(24), s_ytd int, s_order_cnt int, s_remote_cnt int, s_data varchar(50),
  PRIMARY KEY (s_w_id, s_i_id));

-- Random text of lo..hi characters (hex digits: the specification asks for any alphanumerics).
CREATE OR REPLACE FUNCTION tpcc_text(lo int, hi int) RETURNS text LANGUAGE sql VOLATILE AS $$
  SELECT substr(repeat(md5(random()::text), 16), 1, lo + floor(random() * (hi - lo + 1))::int) $$;
-- Text of lo..hi characters that holds "ORIGINAL" at a random place in 10% of the rows (clause 4.3.3.1).
CREATE OR REPLACE FUNCTION tpcc_data(lo int, hi int) RETURNS text LANGUAGE sql VOLATILE AS $$
  SELECT CASE WHEN random() < 0.1 THEN overlay(t PLACING 'ORIGINAL' FROM 1 + floor(random() * (length(t) - 7))::int)
              ELSE t END
  FROM tpcc_text(lo, hi) AS t $$;
-- A number in lo..hi, uniform.
CREATE OR REPLACE FUNCTION tpcc_random(lo int, hi int) RETURNS int LANGUAGE sql VOLATILE AS $$
  SELECT lo + floor(random() * (hi - lo + 1))::int $$;
-- NURand(A, x, y) of clause 2.1.6 with run-time constant c.
CREATE OR REPLACE FUNCTION tpcc_nurand(a int, x int, y int, c int) RETURNS int LANGUAGE sql VOLATILE AS $$
  SELECT (((tpcc_random(0, a) | tpcc_random(x, y)) + c) % (y - x + 1)) + x $$;
-- C_LAST from a number 0..999: three syllables (clause 4.3.2.3).
CREATE OR REPLACE FUNCTION tpcc_last_name(n int) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT s[n / 100 + 1] || s[n / 10 % 10 + 1] || s[n % 10 + 1]
  FROM (SELECT ARRAY['BAR', 'OUGHT', 'ABLE', 'PRI', 'PRES', 'ESE', 'ANTI', 'CALLY', 'ATION', 'EING']) AS a(s) $$;
-- A zip code: four random digits and "11111".
CREATE OR REPLACE FUNCTION tpcc_zip() RETURNS text LANGUAGE sql VOLATILE AS $$
  SELECT lpad(tpcc_random(0, 9999)::text, 4, '0') || '11111' $$;

INSERT INTO item
SELECT i, tpcc_random(1, 10000), tpcc_text(14, 24), tpcc_random(100, 10000) / 100.0, tpcc_data(26, 50)
FROM generate_series(1, 100000) AS i;

INSERT INTO warehouse
SELECT w, tpcc_text(6, 10), tpcc_text(10, 20), tpcc_text(10, 20), tpcc_text(10, 20), upper(tpcc_text(2, 2)),
       tpcc_zip(), tpcc_random(0, 2000) / 10000.0, 300000.00
FROM generate_series(1, :scale) AS w;

INSERT INTO stock
SELECT w, i, tpcc_random(10, 100), tpcc_text(24, 24), tpcc_text(24, 24), tpcc_text(24, 24), tpcc_text(24, 24),
       tpcc_text(24, 24), tpcc_text(24, 24), tpcc_text(24, 24), tpcc_text(24, 24), tpcc_text(24, 24),
       tpcc_text(24, 24), 0, 0, 0, tpcc_data(26, 50)
FROM generate_series(1, :scale) AS w, generate_series(1, 100000) AS i;

INSERT INTO district
SELECT w, d, tpcc_text(6, 10), tpcc_text(10, 20), tpcc_text(10, 20), tpcc_text(10, 20), upper(tpcc_text(2, 2)),
       tpcc_zip(), tpcc_random(0, 2000) / 10000.0, 30000.00, 3001
FROM generate_series(1, :scale) AS w, generate_series(1, 10) AS d;

-- C_LAST: the first 1,000 customers of a district take the names 0..999 in order, the rest NURand(255, 0, 999)
-- with the load's constant 157 (the run uses 223: the difference 66 is within clause 2.1.6.1's bounds).
INSERT INTO customer
SELECT w, d, c, tpcc_text(8, 16), 'OE',
       tpcc_last_name(CASE WHEN c <= 1000 THEN c - 1 ELSE tpcc_nurand(255, 0, 999, 157) END),
       tpcc_text(10, 20), tpcc_text(10, 20), tpcc_text(10, 20), upper(tpcc_text(2, 2)), tpcc_zip(),
       lpad(tpcc_random(0, 99999999)::text, 16, '0'), now(), CASE WHEN random() < 0.1 THEN 'BC' ELSE 'GC' END,
       50000.00, tpcc_random(0, 5000) / 10000.0, -10.00, 10.00, 1, 0, tpcc_text(300, 500)
FROM generate_series(1, :scale) AS w, generate_series(1, 10) AS d, generate_series(1, 3000) AS c;

INSERT INTO history
SELECT c_id, c_d_id, c_w_id, c_d_id, c_w_id, now(), 10.00, tpcc_text(12, 24) FROM customer;

-- 3,000 orders a district, one per customer in a random order; the first 2,100 delivered.
INSERT INTO orders
SELECT w, d, o, c, now(), CASE WHEN o < 2101 THEN tpcc_random(1, 10) END, tpcc_random(5, 15), 1
FROM (SELECT w, d, row_number() OVER (PARTITION BY w, d ORDER BY random())::int AS o, c
      FROM generate_series(1, :scale) AS w, generate_series(1, 10) AS d, generate_series(1, 3000) AS c) AS shuffled;

INSERT INTO order_line
SELECT o_w_id, o_d_id, o_id, n, tpcc_random(1, 100000), o_w_id, CASE WHEN o_id < 2101 THEN o_entry_d END, 5,
       CASE WHEN o_id < 2101 THEN 0.00 ELSE tpcc_random(1, 999999) / 100.0 END, tpcc_text(24, 24)
FROM orders, generate_series(1, o_ol_cnt) AS n;

INSERT INTO new_order SELECT o_w_id, o_d_id, o_id FROM orders WHERE o_id >= 2101;

CREATE INDEX customer_by_name ON customer (c_w_id, c_d_id, c_last, c_first);
CREATE INDEX orders_by_customer ON orders (o_w_id, o_d_id, o_c_id, o_id);
VACUUM ANALYZE;
\ir tpcc-functions.sql
