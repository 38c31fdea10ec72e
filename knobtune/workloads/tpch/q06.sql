-- Q6, forecasting revenue change (clause 2.4.6). :'date', :discount, :quantity.
SELECT sum(l_extendedprice * l_discount) AS revenue
FROM lineitem
WHERE l_shipdate >= date :'date' AND l_shipdate < date :'date' + interval '1 year'
  AND l_discount BETWEEN :discount - 0.01 AND :discount + 0.01 AND l_quantity < :quantity;
