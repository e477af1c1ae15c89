-- SPDX-License-Identifier: Apache-2.0
-- Sample schema for scripts/demo.sh: three related tables with varied column types.
SET client_min_messages = warning;
BEGIN;

DROP TABLE IF EXISTS orders, products, customers;

CREATE TABLE customers (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email       text NOT NULL UNIQUE,
    name        text NOT NULL,
    country     char(2),
    vip         boolean NOT NULL DEFAULT false,
    signed_up   timestamptz NOT NULL DEFAULT now(),
    preferences jsonb
);

CREATE TABLE products (
    sku         text PRIMARY KEY,
    title       text NOT NULL,
    price       numeric(10, 2) NOT NULL CHECK (price >= 0),
    weight_kg   double precision,
    tags        text[],
    launched_on date,
    image       bytea
);

CREATE TABLE orders (
    id          uuid PRIMARY KEY,
    customer_id bigint NOT NULL REFERENCES customers (id),
    sku         text NOT NULL REFERENCES products (sku),
    quantity    integer NOT NULL CHECK (quantity > 0),
    placed_at   timestamptz NOT NULL,
    shipped_at  timestamp,
    note        text
);

INSERT INTO customers (email, name, country, vip, signed_up, preferences) VALUES
    ('ada@example.org',    'Ada Lovelace',     'GB', true,  '2024-01-15 09:30:00+00', '{"newsletter": true}'),
    ('grace@example.org',  'Grace Hopper',     'US', false, '2024-02-01 17:05:12+00', NULL),
    ('bjarne@example.org', 'Bjarne Stroustrup','DK', false, '2024-03-10 08:00:00+01', '{"lang": "da"}'),
    ('chloe@example.org',  'Chloé Zhào',       'FR', true,  '2024-04-22 12:00:00+02', '{"emoji": "❄"}');

INSERT INTO products (sku, title, price, weight_kg, tags, launched_on, image) VALUES
    ('ICE-001', 'Ice axe',          89.90,  0.45, '{climbing,steel}', '2023-11-01', '\x89504e47'),
    ('ICE-002', 'Crampons',        129.00,  0.98, '{climbing}',       '2023-11-01', NULL),
    ('TNT-100', 'Tent, 2 persons', 349.50,  2.10, '{camping}',        '2024-02-14', NULL),
    ('SNW-007', 'Snow shovel',      39.99,  NULL, NULL,               NULL,         NULL);

INSERT INTO orders (id, customer_id, sku, quantity, placed_at, shipped_at, note) VALUES
    ('6f1c0c1e-0a57-4b8e-9a55-2f3f1c7d0001', 1, 'ICE-001', 1, '2024-05-01 10:00:00+00', '2024-05-02 09:00:00', NULL),
    ('6f1c0c1e-0a57-4b8e-9a55-2f3f1c7d0002', 1, 'ICE-002', 1, '2024-05-01 10:00:00+00', '2024-05-02 09:00:00', 'gift wrap'),
    ('6f1c0c1e-0a57-4b8e-9a55-2f3f1c7d0003', 2, 'TNT-100', 1, '2024-06-12 18:45:30+00', NULL,                  NULL),
    ('6f1c0c1e-0a57-4b8e-9a55-2f3f1c7d0004', 4, 'SNW-007', 3, '2024-12-24 07:15:00+01', NULL,                  'livrer avant Noël');

COMMIT;
