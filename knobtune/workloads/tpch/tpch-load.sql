-- TPC-H (TPC Benchmark H, Standard Specification 3.0.1): the eight tables of clause 1.4 populated for
-- scale factor :scale (clause 4.2), generated here in SQL rather than by dbgen. Run with psql -v scale=F.
-- Every value is a hash of its row's key and a stream number (hashint8extended): the same data on every
-- load, whatever order PostgreSQL evaluates the rows in. Departures from dbgen: docs/workloads.md (TPC-H).
SET work_mem = '64MB';  -- this session's load only: the data does not depend on it
SET maintenance_work_mem = '256MB';
SET synchronous_commit = off;

SELECT round(200000 * :scale)::int AS parts, greatest(4, round(10000 * :scale))::int AS suppliers,
       round(150000 * :scale)::int AS customers, round(1500000 * :scale)::int AS orders,
       greatest(1, round(1000 * :scale))::int AS clerks \gset

DROP TABLE IF EXISTS lineitem, orders, partsupp, customer, supplier, part, nation, region CASCADE;

CREATE TABLE region (r_regionkey int NOT NULL, r_name char(25) NOT NULL, r_comment varchar(152) NOT NULL);
CREATE TABLE nation (n_nationkey int NOT NULL, n_name char(25) NOT NULL, n_regionkey int NOT NULL,
  n_comment varchar(152) NOT NULL);
CREATE TABLE part (p_partkey int NOT NULL, p_name varchar(55) NOT NULL, p_mfgr char(25) NOT NULL,
  p_brand char(10) NOT NULL, p_type varchar(25) NOT NULL, p_size int NOT NULL, p_container char(10) NOT NULL,
  p_retailprice numeric(15, 2) NOT NULL, p_comment varchar(23) NOT NULL);
CREATE TABLE supplier (s_suppkey int NOT NULL, s_name char(25) NOT NULL, s_address varchar(40) NOT NULL,
  s_nationkey int NOT NULL, s_phone char(15) NOT NULL, s_acctbal numeric(15, 2) NOT NULL,
  s_comment varchar(101) NOT NULL);
CREATE TABLE partsupp (ps_partkey int NOT NULL, ps_suppkey int NOT NULL, ps_availqty int NOT NULL,
  ps_supplycost numeric(15, 2) NOT NULL, ps_comment varchar(199) NOT NULL);
CREATE TABLE customer (c_custkey int NOT NULL, c_name varchar(25) NOT NULL, c_address varchar(40) NOT NULL,
  c_nationkey int NOT NULL, c_phone char(15) NOT NULL, c_acctbal numeric(15, 2) NOT NULL,
  c_mktsegment char(10) NOT NULL, c_comment varchar(117) NOT NULL);
CREATE TABLE orders (o_orderkey bigint NOT NULL, o_custkey int NOT NULL, o_orderstatus char(1) NOT NULL,
  o_totalprice numeric(15, 2) NOT NULL, o_orderdate date NOT NULL, o_orderpriority char(15) NOT NULL,
  o_clerk char(15) NOT NULL, o_shippriority int NOT NULL, o_comment varchar(79) NOT NULL);
CREATE TABLE lineitem (l_orderkey bigint NOT NULL, l_partkey int NOT NULL, l_suppkey int NOT NULL,
  l_linenumber int NOT NULL, l_quantity numeric(15, 2) NOT NULL, l_extendedprice numeric(15, 2) NOT NULL,
  l_discount numeric(15, 2) NOT NULL, l_tax numeric(15, 2) NOT NULL, l_returnflag char(1) NOT NULL,
  l_linestatus char(1) NOT NULL, l_shipdate date NOT NULL, l_commitdate date NOT NULL, l_receiptdate date NOT NULL,
  l_shipinstruct char(25) NOT NULL, l_shipmode char(10) NOT NULL, l_comment varchar(44) NOT NULL);

-- A uniform number in [0, 1) from a row's key and a stream, and a uniform integer in lo..hi.
CREATE OR REPLACE FUNCTION tpch_rand(k bigint, stream int) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT (hashint8extended(k, stream) & 4503599627370495)::float8 / 4503599627370496.0 $$;
CREATE OR REPLACE FUNCTION tpch_int(k bigint, stream int, lo int, hi int) RETURNS int LANGUAGE sql IMMUTABLE
PARALLEL SAFE AS $$ SELECT lo + floor(tpch_rand(k, stream) * (hi - lo + 1))::int $$;
-- One of a list's entries, uniform.
CREATE OR REPLACE FUNCTION tpch_pick(k bigint, stream int, list text[]) RETURNS text LANGUAGE sql IMMUTABLE
PARALLEL SAFE AS $$ SELECT list[tpch_int(k, stream, 1, cardinality(list))] $$;
-- Ten words of a 64-word vocabulary (dbgen's grammar's nouns, verbs, adjectives and adverbs), six bits of one hash each.
CREATE OR REPLACE FUNCTION tpch_phrase(h bigint) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT concat_ws(' ', w[1 + (h & 63)], w[1 + ((h >> 6) & 63)], w[1 + ((h >> 12) & 63)], w[1 + ((h >> 18) & 63)],
                   w[1 + ((h >> 24) & 63)], w[1 + ((h >> 30) & 63)], w[1 + ((h >> 36) & 63)],
                   w[1 + ((h >> 42) & 63)], w[1 + ((h >> 48) & 63)], w[1 + ((h >> 54) & 63)])
  FROM (SELECT '{packages,requests,accounts,deposits,foxes,ideas,theodolites,pinto,beans,instructions,
    dependencies,excuses,platelets,asymptotes,courts,dolphins,sleep,wake,are,cajole,haggle,nag,use,boost,
    detect,integrate,maintain,nod,thrash,promise,engage,print,furious,sly,careful,blithe,quick,fluffy,slow,
    quiet,final,ironic,even,bold,silent,special,pending,unusual,express,regular,furiously,slyly,carefully,
    blithely,quickly,fluffily,slowly,quietly,finally,ironically,evenly,boldly,silently,regularly}'::text[]
  ) AS v(w) $$;
-- Text of lo..hi characters (dbgen's comments: words of its grammar).
CREATE OR REPLACE FUNCTION tpch_text(k bigint, stream int, lo int, hi int) RETURNS text LANGUAGE sql IMMUTABLE
PARALLEL SAFE AS $$
  SELECT left(tpch_phrase(hashint8extended(k, stream)) || CASE WHEN hi > 50 THEN ' ' || tpch_phrase(
    hashint8extended(k, stream + 1000)) || ' ' || tpch_phrase(hashint8extended(k, stream + 2000)) ELSE '' END
    || CASE WHEN hi > 150 THEN ' ' || tpch_phrase(hashint8extended(k, stream + 3000)) ELSE '' END,
    tpch_int(k, stream + 4000, lo, hi)) $$;
-- A phone number of the nation's country code (clause 4.2.2.9).
CREATE OR REPLACE FUNCTION tpch_phone(k bigint, stream int, nation int) RETURNS text LANGUAGE sql IMMUTABLE
PARALLEL SAFE AS $$
  SELECT format('%s-%s-%s-%s', nation + 10, tpch_int(k, stream, 100, 999), tpch_int(k, stream + 1, 100, 999),
                tpch_int(k, stream + 2, 1000, 9999)) $$;

INSERT INTO region VALUES (0, 'AFRICA', ''), (1, 'AMERICA', ''), (2, 'ASIA', ''), (3, 'EUROPE', ''),
  (4, 'MIDDLE EAST', '');
UPDATE region SET r_comment = tpch_text(r_regionkey, 1, 31, 115);
INSERT INTO nation (n_nationkey, n_name, n_regionkey, n_comment)
SELECT i - 1, n, r, tpch_text(i - 1, 2, 31, 114)
FROM unnest('{ALGERIA,ARGENTINA,BRAZIL,CANADA,EGYPT,ETHIOPIA,FRANCE,GERMANY,INDIA,INDONESIA,IRAN,IRAQ,JAPAN,
  JORDAN,KENYA,MOROCCO,MOZAMBIQUE,PERU,CHINA,ROMANIA,SAUDI ARABIA,VIETNAM,RUSSIA,UNITED KINGDOM,UNITED STATES}'::text[],
  '{0,1,1,1,4,0,3,3,2,2,4,4,2,4,0,0,0,1,2,3,4,2,3,3,1}'::int[]) WITH ORDINALITY AS t(n, r, i);

INSERT INTO part
SELECT k, (SELECT string_agg(c[tpch_int(k, 10 + j, 1, 92)], ' ' ORDER BY j) FROM generate_series(1, 5) AS j),
  'Manufacturer#' || m, 'Brand#' || m || tpch_int(k, 16, 1, 5),
  tpch_pick(k, 17, '{STANDARD,SMALL,MEDIUM,LARGE,ECONOMY,PROMO}') || ' '
    || tpch_pick(k, 18, '{ANODIZED,BURNISHED,PLATED,POLISHED,BRUSHED}') || ' '
    || tpch_pick(k, 19, '{TIN,NICKEL,BRASS,STEEL,COPPER}'),
  tpch_int(k, 20, 1, 50),
  tpch_pick(k, 21, '{SM,LG,MED,JUMBO,WRAP}') || ' ' || tpch_pick(k, 22, '{CASE,BOX,BAG,JAR,PKG,PACK,CAN,DRUM}'),
  (90000 + (k / 10) % 20001 + 100 * (k % 1000)) / 100.0, tpch_text(k, 23, 5, 22)
FROM (SELECT k, tpch_int(k, 15, 1, 5) AS m FROM generate_series(1, :parts) AS k OFFSET 0) AS p,
  (SELECT '{almond,antique,aquamarine,azure,beige,bisque,black,blanched,blue,blush,brown,burlywood,burnished,
    chartreuse,chiffon,chocolate,coral,cornflower,cornsilk,cream,cyan,dark,deep,dim,dodger,drab,firebrick,floral,
    forest,frosted,gainsboro,ghost,goldenrod,green,grey,honeydew,hot,indian,ivory,khaki,lace,lavender,lawn,lemon,
    light,lime,linen,magenta,maroon,medium,metallic,midnight,mint,misty,moccasin,navajo,navy,olive,orange,orchid,
    pale,papaya,peach,peru,pink,plum,powder,puff,purple,red,rose,rosy,royal,saddle,salmon,sandy,seashell,sienna,
    sky,slate,smoke,snow,spring,steel,tan,thistle,tomato,turquoise,violet,wheat,white,yellow}'::text[] AS c) AS colors;

-- SF x 5 suppliers complain and SF x 5 recommend (clause 4.2.3, S_COMMENT), spread by their keys.
INSERT INTO supplier
SELECT k, 'Supplier#' || lpad(k::text, 9, '0'), tpch_text(k, 30, 10, 40), n, tpch_phone(k, 31, n),
  tpch_int(k, 34, -99999, 999999) / 100.0,
  CASE WHEN k % 1000 = 17 THEN left('Customer ' || tpch_text(k, 35, 5, 20) || ' Complaints ' || tpch_text(k, 36, 5, 50), 100)
       WHEN k % 1000 = 517 THEN left('Customer ' || tpch_text(k, 35, 5, 20) || ' Recommends ' || tpch_text(k, 36, 5, 50), 100)
       ELSE tpch_text(k, 37, 25, 100) END
FROM (SELECT k, tpch_int(k, 33, 0, 24) AS n FROM generate_series(1, :suppliers) AS k OFFSET 0) AS s;

INSERT INTO partsupp
SELECT p, (p + i * (:suppliers / 4 + (p - 1) / :suppliers)) % :suppliers + 1, tpch_int(p * 4 + i, 40, 1, 9999),
  tpch_int(p * 4 + i, 41, 100, 100000) / 100.0, tpch_text(p * 4 + i, 42, 49, 198)
FROM generate_series(1, :parts) AS p, generate_series(0, 3) AS i;

INSERT INTO customer
SELECT k, 'Customer#' || lpad(k::text, 9, '0'), tpch_text(k, 50, 10, 40), n, tpch_phone(k, 51, n),
  tpch_int(k, 54, -99999, 999999) / 100.0, tpch_pick(k, 55, '{AUTOMOBILE,BUILDING,FURNITURE,MACHINERY,HOUSEHOLD}'),
  tpch_text(k, 56, 29, 116)
FROM (SELECT k, tpch_int(k, 53, 0, 24) AS n FROM generate_series(1, :customers) AS k OFFSET 0) AS c;

-- Orders use the first 8 keys of every 32 (clause 4.2.3); each has 1..7 lines. Dates: clause 4.2.3, with
-- STARTDATE 1992-01-01, ENDDATE 1998-12-31 and CURRENTDATE 1995-06-17.
CREATE TEMP TABLE order_keys AS
SELECT ((i - 1) / 8) * 32 + (i - 1) % 8 + 1 AS k FROM generate_series(1, :orders) AS i;

INSERT INTO lineitem
SELECT k, partkey, (partkey + si * (:suppliers / 4 + (partkey - 1) / :suppliers)) % :suppliers + 1, j, qty,
  qty * (90000 + (partkey / 10) % 20001 + 100 * (partkey % 1000)) / 100.0,
  tpch_int(lk, 23, 0, 10) / 100.0, tpch_int(lk, 24, 0, 8) / 100.0,
  CASE WHEN ship + received <= date '1995-06-17' THEN CASE WHEN tpch_rand(lk, 28) < 0.5 THEN 'R' ELSE 'A' END
       ELSE 'N' END,
  CASE WHEN ship > date '1995-06-17' THEN 'O' ELSE 'F' END,
  ship, ordered + tpch_int(lk, 26, 30, 90), ship + received,
  tpch_pick(lk, 29, '{DELIVER IN PERSON,COLLECT COD,NONE,TAKE BACK RETURN}'),
  tpch_pick(lk, 30, '{REG AIR,AIR,RAIL,SHIP,TRUCK,MAIL,FOB}'), tpch_text(lk, 31, 10, 43)
FROM (SELECT k, j, lk, ordered, tpch_int(lk, 20, 1, :parts) AS partkey, tpch_int(lk, 21, 0, 3) AS si,
             tpch_int(lk, 22, 1, 50) AS qty, ordered + tpch_int(lk, 25, 1, 121) AS ship,
             tpch_int(lk, 27, 1, 30) AS received
      FROM (SELECT k, date '1992-01-01' + tpch_int(k, 10, 0, 2405) AS ordered FROM order_keys OFFSET 0) AS o,
           LATERAL generate_series(1, tpch_int(k, 11, 1, 7)) AS j, LATERAL (SELECT k * 8 + j AS lk) AS key
      OFFSET 0) AS l;

INSERT INTO orders
SELECT k, CASE WHEN c % 3 = 0 THEN c - 1 ELSE c END,  -- a third of the customers place no order
  CASE WHEN lines.open = 0 THEN 'F' WHEN lines.open = lines.n THEN 'O' ELSE 'P' END, lines.total,
  date '1992-01-01' + tpch_int(k, 10, 0, 2405),
  tpch_pick(k, 13, '{1-URGENT,2-HIGH,3-MEDIUM,4-NOT SPECIFIED,5-LOW}'),
  'Clerk#' || lpad(tpch_int(k, 14, 1, :clerks)::text, 9, '0'), 0, tpch_text(k, 15, 19, 78)
FROM (SELECT k, tpch_int(k, 12, 1, :customers) AS c FROM order_keys OFFSET 0) AS o
JOIN (SELECT l_orderkey, count(*) AS n, count(*) FILTER (WHERE l_linestatus = 'O') AS open,
             sum(round(l_extendedprice * (1 + l_tax) * (1 - l_discount), 2)) AS total
      FROM lineitem GROUP BY l_orderkey) AS lines ON lines.l_orderkey = o.k;

ALTER TABLE region ADD PRIMARY KEY (r_regionkey);
ALTER TABLE nation ADD PRIMARY KEY (n_nationkey);
ALTER TABLE part ADD PRIMARY KEY (p_partkey);
ALTER TABLE supplier ADD PRIMARY KEY (s_suppkey);
ALTER TABLE partsupp ADD PRIMARY KEY (ps_partkey, ps_suppkey);
ALTER TABLE customer ADD PRIMARY KEY (c_custkey);
ALTER TABLE orders ADD PRIMARY KEY (o_orderkey);
ALTER TABLE lineitem ADD PRIMARY KEY (l_orderkey, l_linenumber);
-- The foreign keys of clause 1.4.2 (the planner reads them to estimate joins).
ALTER TABLE nation ADD FOREIGN KEY (n_regionkey) REFERENCES region;
ALTER TABLE supplier ADD FOREIGN KEY (s_nationkey) REFERENCES nation;
ALTER TABLE customer ADD FOREIGN KEY (c_nationkey) REFERENCES nation;
ALTER TABLE partsupp ADD FOREIGN KEY (ps_partkey) REFERENCES part;
ALTER TABLE partsupp ADD FOREIGN KEY (ps_suppkey) REFERENCES supplier;
ALTER TABLE orders ADD FOREIGN KEY (o_custkey) REFERENCES customer;
ALTER TABLE lineitem ADD FOREIGN KEY (l_orderkey) REFERENCES orders;
ALTER TABLE lineitem ADD FOREIGN KEY (l_partkey, l_suppkey) REFERENCES partsupp;
-- Indexes on the join columns the correlated subqueries of Q2, Q17, Q20 and Q21 look up.
CREATE INDEX lineitem_part_supp ON lineitem (l_partkey, l_suppkey);
CREATE INDEX orders_customer ON orders (o_custkey);
CREATE INDEX partsupp_supplier ON partsupp (ps_suppkey);

DROP FUNCTION tpch_phone, tpch_text, tpch_phrase, tpch_pick, tpch_int, tpch_rand;
-- Hint bits and the visibility map set once here, so that no run pays for writing them; statistics for the planner.
VACUUM (FREEZE, ANALYZE);
