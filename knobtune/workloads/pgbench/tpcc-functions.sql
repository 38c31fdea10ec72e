-- TPC-C's five transactions (clauses 2.4-2.8) as server-side functions, one pgbench script each calling
-- one function: the whole transaction runs inside the server, one round trip, as stored procedures do
-- in the published kits. pgbench draws the terminal's inputs; the functions draw the per-line inputs.
-- Rows that two transactions both update are locked in one order everywhere (warehouse, district,
-- customer; stock by warehouse and item), so they wait rather than deadlock.

-- New-Order (2.4): an order of ol_cnt lines; rbk: the last line names an unused item and the whole
-- transaction rolls back (1% of them). Returns the order's total, or NULL when it rolled back.
CREATE OR REPLACE FUNCTION tpcc_new_order(w int, d int, c int, ol_cnt int, rbk boolean, warehouses int)
RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE
  items int[]; supplies int[]; quantities int[]; w_tax_ numeric; d_tax_ numeric; o int; discount numeric;
  total numeric := 0; line record; price numeric; dist text;
BEGIN
  SELECT array_agg(CASE WHEN rbk AND n = ol_cnt THEN 100001 ELSE tpcc_nurand(8191, 1, 100000, 7911) END ORDER BY n),
         array_agg(CASE WHEN warehouses > 1 AND random() < 0.01  -- 1% of lines from another warehouse
                        THEN 1 + (w - 1 + tpcc_random(1, warehouses - 1)) % warehouses ELSE w END ORDER BY n),
         array_agg(tpcc_random(1, 10) ORDER BY n)
    INTO items, supplies, quantities FROM generate_series(1, ol_cnt) AS n;
  BEGIN
    SELECT w_tax INTO w_tax_ FROM warehouse WHERE w_id = w;
    UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = w AND d_id = d
      RETURNING d_tax, d_next_o_id - 1 INTO d_tax_, o;
    SELECT c_discount INTO discount FROM customer WHERE c_w_id = w AND c_d_id = d AND c_id = c;
    INSERT INTO orders VALUES (w, d, o, c, now(), NULL, ol_cnt, (w = ALL (supplies))::int);
    INSERT INTO new_order VALUES (w, d, o);
    FOR line IN SELECT * FROM unnest(items, supplies, quantities) WITH ORDINALITY AS l(i, supply, qty, n)
                ORDER BY supply, i LOOP
      SELECT i_price INTO price FROM item WHERE i_id = line.i;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'tpcc: item number is not valid';
      END IF;
      UPDATE stock SET s_quantity = CASE WHEN s_quantity >= line.qty + 10 THEN s_quantity - line.qty
                                         ELSE s_quantity - line.qty + 91 END,
                       s_ytd = s_ytd + line.qty, s_order_cnt = s_order_cnt + 1,
                       s_remote_cnt = s_remote_cnt + (line.supply <> w)::int
        WHERE s_w_id = line.supply AND s_i_id = line.i
        RETURNING CASE d WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03 WHEN 4 THEN s_dist_04
                         WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06 WHEN 7 THEN s_dist_07 WHEN 8 THEN s_dist_08
                         WHEN 9 THEN s_dist_09 ELSE s_dist_10 END INTO dist;
      INSERT INTO order_line VALUES (w, d, o, line.n, line.i, line.supply, NULL, line.qty, line.qty * price, dist);
      total := total + line.qty * price;
    END LOOP;
  EXCEPTION WHEN raise_exception THEN
    RETURN NULL;  -- everything since BEGIN is undone, the district's order number too (clause 2.4.2.3)
  END;
  RETURN total * (1 - discount) * (1 + w_tax_ + d_tax_);
END $$;

-- The customer a Payment or Order-Status names: by number, or (by_name) the middle one, sorted by
-- C_FIRST, of those with the last name that number 0..999 gives (clause 2.5.2.2).
CREATE OR REPLACE FUNCTION tpcc_customer(w int, d int, c int, name_number int, by_name boolean)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE ids int[];
BEGIN
  IF NOT by_name THEN
    RETURN c;
  END IF;
  SELECT array_agg(c_id ORDER BY c_first) INTO ids FROM customer
    WHERE c_w_id = w AND c_d_id = d AND c_last = tpcc_last_name(name_number);
  RETURN ids[(array_length(ids, 1) + 1) / 2];
END $$;

-- Payment (2.5): a payment by a customer of district (cw, cd) through district (w, d).
CREATE OR REPLACE FUNCTION tpcc_payment(w int, d int, cw int, cd int, c int, name_number int, by_name boolean, amount numeric)
RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE w_name_ text; d_name_ text; cid int; credit text; balance numeric;
BEGIN
  UPDATE warehouse SET w_ytd = w_ytd + amount WHERE w_id = w RETURNING w_name INTO w_name_;
  UPDATE district SET d_ytd = d_ytd + amount WHERE d_w_id = w AND d_id = d RETURNING d_name INTO d_name_;
  cid := tpcc_customer(cw, cd, c, name_number, by_name);
  UPDATE customer SET c_balance = c_balance - amount, c_ytd_payment = c_ytd_payment + amount,
                      c_payment_cnt = c_payment_cnt + 1
    WHERE c_w_id = cw AND c_d_id = cd AND c_id = cid RETURNING c_credit, c_balance INTO credit, balance;
  IF credit = 'BC' THEN
    UPDATE customer SET c_data = left(format('%s %s %s %s %s %s | ', cid, cd, cw, d, w, amount) || c_data, 500)
      WHERE c_w_id = cw AND c_d_id = cd AND c_id = cid;
  END IF;
  INSERT INTO history VALUES (cid, cd, cw, d, w, now(), amount, left(w_name_ || '    ' || d_name_, 24));
  RETURN balance;
END $$;

-- Order-Status (2.6): a customer's last order and its lines. Read only.
CREATE OR REPLACE FUNCTION tpcc_order_status(w int, d int, c int, name_number int, by_name boolean)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE cid int; last_order int; lines int;
BEGIN
  cid := tpcc_customer(w, d, c, name_number, by_name);
  PERFORM c_balance, c_first, c_middle, c_last FROM customer WHERE c_w_id = w AND c_d_id = d AND c_id = cid;
  SELECT o_id INTO last_order FROM orders WHERE o_w_id = w AND o_d_id = d AND o_c_id = cid
    ORDER BY o_id DESC LIMIT 1;
  SELECT count(*) INTO lines FROM (SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d
                                   FROM order_line WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = last_order) AS l;
  RETURN lines;
END $$;

-- Delivery (2.7): the oldest undelivered order of each of the warehouse's ten districts, in one
-- transaction (the specification lets it be deferred; here it runs at once). Returns orders delivered.
CREATE OR REPLACE FUNCTION tpcc_delivery(w int, carrier int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE d int; o int; cid int; amount numeric; delivered int := 0;
BEGIN
  FOR d IN 1..10 LOOP
    SELECT no_o_id INTO o FROM new_order WHERE no_w_id = w AND no_d_id = d
      ORDER BY no_o_id LIMIT 1 FOR UPDATE;
    -- none left, or a concurrent Delivery took it while this one waited: skipped (clause 2.7.4.2)
    CONTINUE WHEN NOT FOUND;
    DELETE FROM new_order WHERE no_w_id = w AND no_d_id = d AND no_o_id = o;
    UPDATE orders SET o_carrier_id = carrier WHERE o_w_id = w AND o_d_id = d AND o_id = o RETURNING o_c_id INTO cid;
    UPDATE order_line SET ol_delivery_d = now() WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = o;
    SELECT sum(ol_amount) INTO amount FROM order_line WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id = o;
    UPDATE customer SET c_balance = c_balance + amount, c_delivery_cnt = c_delivery_cnt + 1
      WHERE c_w_id = w AND c_d_id = d AND c_id = cid;
    delivered := delivered + 1;
  END LOOP;
  RETURN delivered;
END $$;

-- Stock-Level (2.8): how many distinct items of the district's last 20 orders are below the threshold.
CREATE OR REPLACE FUNCTION tpcc_stock_level(w int, d int, threshold int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE next_o int; low int;
BEGIN
  SELECT d_next_o_id INTO next_o FROM district WHERE d_w_id = w AND d_id = d;
  SELECT count(DISTINCT s_i_id) INTO low FROM order_line JOIN stock ON s_w_id = w AND s_i_id = ol_i_id
    WHERE ol_w_id = w AND ol_d_id = d AND ol_o_id >= next_o - 20 AND ol_o_id < next_o AND s_quantity < threshold;
  RETURN low;
END $$;
