-- Q22, global sales opportunity (clause 2.4.22). :'code1' .. :'code7', country codes.
SELECT cntrycode, count(*) AS numcust, sum(c_acctbal) AS totacctbal
FROM (SELECT substring(c_phone FROM 1 FOR 2) AS cntrycode, c_acctbal
      FROM customer
      WHERE substring(c_phone FROM 1 FOR 2) IN (:'code1', :'code2', :'code3', :'code4', :'code5', :'code6', :'code7')
        AND c_acctbal > (SELECT avg(c_acctbal) FROM customer WHERE c_acctbal > 0.00
                         AND substring(c_phone FROM 1 FOR 2) IN (:'code1', :'code2', :'code3', :'code4', :'code5',
                                                                  :'code6', :'code7'))
        AND NOT EXISTS (SELECT * FROM orders WHERE o_custkey = c_custkey)) AS custsale
GROUP BY cntrycode
ORDER BY cntrycode;
