-- Q3, shipping priority (clause 2.4.3). :'segment', :'date'. l_orderkey breaks ties under the LIMIT.
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate, o_shippriority
FROM customer, orders, lineitem
WHERE c_mktsegment = :'segment' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
  AND o_orderdate < date :'date' AND l_shipdate > date :'date'
GROUP BY l_orderkey, o_orderdate, o_shippriority
ORDER BY revenue DESC, o_orderdate, l_orderkey
LIMIT 10;
