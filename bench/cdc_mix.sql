-- SPDX-License-Identifier: Apache-2.0
-- pgbench script of the CDC benchmark: one change per transaction on trips, 50% inserts of new
-- trips (ids from sequence trips_cdc_id, above the generated ones), 35% updates of a random
-- existing trip (tip and total), 15% deletes of a random existing trip.
-- Variables (pgbench -D): maxid = the highest generated id.
\set r random(1, 100)
\set id random(1, :maxid)
\if :r <= 50
\set dist random(30, 1500)
\set mins random(3, 60)
\set pu random(1, 265)
\set dz random(1, 265)
\set tip random(0, 800)
INSERT INTO trips (id, vendor_id, pickup_at, dropoff_at, passenger_count, trip_distance,
                   ratecode_id, store_and_fwd_flag, pu_location_id, do_location_id, payment_type,
                   fare_amount, extra, mta_tax, tip_amount, tolls_amount, improvement_surcharge,
                   total_amount, congestion_surcharge, airport_fee)
VALUES (nextval('trips_cdc_id'), 2, localtimestamp(0), localtimestamp(0) + :mins * interval '1 minute',
        1, :dist / 100.0, 1, 'N', :pu, :dz, 1, 3.00 + 3.50 * :dist / 100.0 + 0.35 * :mins, 2.50, 0.50,
        :tip / 100.0, 0, 1.00, 3.00 + 3.50 * :dist / 100.0 + 0.35 * :mins + 6.50 + :tip / 100.0,
        2.50, 0);
\elif :r <= 85
UPDATE trips SET tip_amount = tip_amount + 1.00, total_amount = total_amount + 1.00
 WHERE id = :id;
\else
DELETE FROM trips WHERE id = :id;
\endif
