-- TPC-C Delivery (clause 2.7.1): a warehouse's oldest undelivered order in each district, one carrier.
\set w random(1, :scale)
\set carrier random(1, 10)
SELECT tpcc_delivery(:w, :carrier);
