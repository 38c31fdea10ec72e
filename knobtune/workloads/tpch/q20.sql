-- Q20, potential part promotion (clause 2.4.20). :'color', :'date', :'nation'.
SELECT s_name, s_address
FROM supplier, nation
WHERE s_suppkey IN (SELECT ps_suppkey FROM partsupp
                    WHERE ps_partkey IN (SELECT p_partkey FROM part WHERE p_name LIKE :'color' || '%')
                      AND ps_availqty > (SELECT 0.5 * sum(l_quantity) FROM lineitem
                                         WHERE l_partkey = ps_partkey AND l_suppkey = ps_suppkey
                                           AND l_shipdate >= date :'date'
                                           AND l_shipdate < date :'date' + interval '1 year'))
  AND s_nationkey = n_nationkey AND n_name = :'nation'
ORDER BY s_name;
