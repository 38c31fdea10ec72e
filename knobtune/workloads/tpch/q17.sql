-- Q17, small-quantity-order revenue (clause 2.4.17). :'brand', :'container'.
SELECT sum(l_extendedprice) / 7.0 AS avg_yearly
FROM lineitem, part
WHERE p_partkey = l_partkey AND p_brand = :'brand' AND p_container = :'container'
  AND l_quantity < (SELECT 0.2 * avg(l_quantity) FROM lineitem WHERE l_partkey = p_partkey);
