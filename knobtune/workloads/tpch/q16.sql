-- Q16, parts/supplier relationship (clause 2.4.16). :'brand', :'type' (two syllables), :size1 .. :size8.
SELECT p_brand, p_type, p_size, count(DISTINCT ps_suppkey) AS supplier_cnt
FROM partsupp, part
WHERE p_partkey = ps_partkey AND p_brand <> :'brand' AND p_type NOT LIKE :'type' || '%'
  AND p_size IN (:size1, :size2, :size3, :size4, :size5, :size6, :size7, :size8)
  AND ps_suppkey NOT IN (SELECT s_suppkey FROM supplier WHERE s_comment LIKE '%Customer%Complaints%')
GROUP BY p_brand, p_type, p_size
ORDER BY supplier_cnt DESC, p_brand, p_type, p_size;
