-- SPDX-License-Identifier: Apache-2.0
-- The type corpus (issue 5): one table, firn_type_corpus, with a column of every PostgreSQL type
-- firn maps (docs/type-mapping.md) and rows of edge values: NULLs, extremes, NaN and infinities,
-- infinite and out-of-range dates/timestamps, time zones, unicode, empty strings, empty and
-- multi-dimensional arrays. Shared by the backfill, CDC and engine tests: keep it idempotent and
-- add rows/columns rather than changing existing ones. Needs the citext extension (contrib).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS citext;
DROP TABLE IF EXISTS firn_type_corpus;
DROP TYPE IF EXISTS firn_mood CASCADE;
DROP TYPE IF EXISTS firn_pair CASCADE;
DROP DOMAIN IF EXISTS firn_posint CASCADE;
DROP DOMAIN IF EXISTS firn_email CASCADE;
DROP DOMAIN IF EXISTS firn_price CASCADE;
DROP TYPE IF EXISTS firn_semi CASCADE;
CREATE TYPE firn_mood AS ENUM ('sad', 'ok', 'happy 😀');
CREATE TYPE firn_pair AS (a int4, b text);
CREATE DOMAIN firn_posint AS int4 CHECK (VALUE > 0);
CREATE DOMAIN firn_email AS text CHECK (VALUE LIKE '%@%');
CREATE DOMAIN firn_price AS numeric(12, 3);
-- A base type unknown to firn whose array elements are delimited by ';' (as PostGIS geometry's by
-- ':'): text's I/O functions, typdelim ';'.
CREATE TYPE firn_semi;
CREATE FUNCTION firn_semi_in(cstring) RETURNS firn_semi LANGUAGE internal IMMUTABLE STRICT
    AS 'textin';
CREATE FUNCTION firn_semi_out(firn_semi) RETURNS cstring LANGUAGE internal IMMUTABLE STRICT
    AS 'textout';
CREATE TYPE firn_semi (INPUT = firn_semi_in, OUTPUT = firn_semi_out, LIKE = text,
    DELIMITER = ';');

CREATE TABLE firn_type_corpus (
    id int4 PRIMARY KEY,
    c_bool bool,
    c_int2 int2,
    c_int4 int4,
    c_int8 int8,
    c_float4 float4,
    c_float8 float8,
    c_num_10_2 numeric(10, 2),
    c_num_38_10 numeric(38, 10),
    c_num_18_0 numeric(18, 0),
    c_num numeric,
    c_num_50_5 numeric(50, 5),
    c_money money,
    c_text text,
    c_varchar varchar(20),
    c_char char(5),
    c_name name,
    c_citext citext,
    c_char1 "char",
    c_bytea bytea,
    c_uuid uuid,
    c_date date,
    c_time time,
    c_timetz timetz,
    c_ts timestamp,
    c_tstz timestamptz,
    c_ts3 timestamp(3),
    c_interval interval,
    c_json json,
    c_jsonb jsonb,
    c_xml xml,
    c_inet inet,
    c_cidr cidr,
    c_macaddr macaddr,
    c_macaddr8 macaddr8,
    c_bit bit(4),
    c_varbit varbit,
    c_enum firn_mood,
    c_posint firn_posint,
    c_email firn_email,
    c_price firn_price,
    c_oid oid,
    c_tsvector tsvector,
    c_tsquery tsquery,
    c_point point,
    c_line line,
    c_lseg lseg,
    c_box box,
    c_path path,
    c_polygon polygon,
    c_circle circle,
    c_pair firn_pair,
    c_int4range int4range,
    c_numrange numrange,
    c_tstzrange tstzrange,
    c_datemultirange datemultirange,
    c_pg_lsn pg_lsn,
    c_int4_arr int4[],
    c_int2d int4[][],
    c_text_arr text[],
    c_num_arr numeric(10, 2)[],
    c_numx_arr numeric[],
    c_tstz_arr timestamptz[],
    c_uuid_arr uuid[],
    c_bytea_arr bytea[],
    c_bool_arr bool[],
    c_float8_arr float8[],
    c_date_arr date[],
    c_interval_arr interval[],
    c_inet_arr inet[],
    c_enum_arr firn_mood[],
    c_jsonb_arr jsonb[],
    c_posint_arr firn_posint[],
    c_box_arr box[],
    c_money_arr money[],
    c_text2d text[][],
    c_int2vec int2vector,
    c_oidvec oidvector,
    c_int2vec_arr int2vector[],
    c_semi_arr firn_semi[]
);

-- 1: ordinary values
INSERT INTO firn_type_corpus VALUES (1,
    true, 12, 123456, 1234567890123, 1.5, 3.141592653589793,
    12345.67, 1234567890.0123456789, 123456789012345678, 3.14159265358979323846264338327950288419716939937510,
    1234567890123456789012345678901234567890.12345, 1234.56,
    'hello', 'varchar', 'ab', 'a_name', 'MiXeD CaSe', 'x',
    '\x00ff10', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2024-02-29', '13:45:30.123456', '13:45:30.5+05:30',
    '2024-02-29 13:45:30.123456', '2024-02-29 13:45:30.123456+02', '2024-02-29 13:45:30.123',
    '1 year 2 mons 3 days 04:05:06.789',
    '{"b": 1, "a": [1, 2.50, "x"]}', '{"b": 1, "a": [1, 2.50, "x"]}', '<a href="x">t&amp;</a>',
    '192.168.1.5/24', '10.0.0.0/8', '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05', B'1010', B'10111',
    'ok', 42, 'me@example.com', 123456789.123, 4000000000,
    'a fat cat sat on a mat', 'fat & (rat | cat)',
    '(1.5,-2.25)', '{1,2,3}', '[(0,0),(1,1)]', '(1,1),(0,0)', '[(0,0),(1,1),(2,0)]', '((0,0),(1,1),(2,0))',
    '<(1,2),3>', ROW(7, 'seven "quoted"'), '[1,10)', '(1.5,2.5]', '[2024-01-01 00:00+00,2024-02-01 00:00+00)',
    '{[2024-01-01,2024-01-05),[2024-02-01,2024-02-03)}', '16/B374D848',
    '{1,2,3}', '{{1,2},{3,4}}', '{"a","b c","","with,comma","quote\"d"}', '{1.10,-2.25}', '{1.5,NaN,-0.001}',
    '{"2024-01-01 00:00:00+00","1999-12-31 23:59:59.999999+00"}', '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}',
    '{"\\x00","\\xdeadbeef"}', '{t,f}', '{1.5,-0}', '{2024-01-01,1970-01-01}', '{"1 day","-00:00:01"}',
    '{192.168.0.1,::1/128}', '{sad,"happy 😀"}', '{"{\"k\": 1}","[]"}', '{1,2}');

-- 2: every column NULL
INSERT INTO firn_type_corpus (id) VALUES (2);

-- 3: maxima, +infinity, unicode, empty values
INSERT INTO firn_type_corpus VALUES (3,
    false, 32767, 2147483647, 9223372036854775807, 3.4028235e38, 1.7976931348623157e308,
    99999999.99, 9999999999999999999999999999.9999999999, 999999999999999999, 'Infinity',
    99999999999999999999999999999999999999999999.99999, 92233720368547758.07,
    'héllo wörld ❄ 雪 🧊', '', '', '', '', '',
    '\x', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 'infinity', '23:59:59.999999', '23:59:59.999999-15:59',
    'infinity', 'infinity', 'infinity',
    '178000000 years',
    '"ünïcødé \u00e9"', '{"emoji": "🧊", "nested": {"deep": [null, true, false]}}', '<r>雪</r>',
    '::ffff:1.2.3.4', '2001:db8::/32', 'ff:ff:ff:ff:ff:ff', 'ff:ff:ff:ff:ff:ff:ff:ff', B'1111', B'',
    'happy 😀', 2147483647, '@', 999999999.999, 4294967295,
    '', '!x',
    '(1e+300,-1e-300)', '{1,-1,0}', '[(1e10,1e10),(-1e10,-1e10)]', '(1,1),(1,1)', '((0,0))', '((0,0))',
    '<(0,0),0>', ROW(NULL, ''), 'empty', '(,)', '(,"2024-01-01 00:00:00+00")',
    '{}', '0/0',
    '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}');

-- 4: minima, -infinity, NaN, time zones, nulls inside arrays, multi-dimensional arrays
INSERT INTO firn_type_corpus VALUES (4,
    NULL, -32768, -2147483648, -9223372036854775808, 'NaN', '-Infinity',
    'NaN', -9999999999999999999999999999.9999999999, -999999999999999999, '-Infinity',
    -0.00001, -92233720368547758.08,
    E'tab\there\nnewline "quotes" \\ backslash', ' spaces ', 'a    ', 'UPPER', 'ß', E'\\001',
    '\x5c22', '00000000-0000-0000-0000-000000000000', '-infinity', '24:00:00', '00:00:00+15:59',
    '-infinity', '-infinity', '-infinity',
    '-178000000 years -1 day -00:00:00.000001',
    'null', '[]', '', '0.0.0.0/0', '::/0', '00:00:00:00:00:00', '00:00:00:00:00:00:00:00', B'0000', B'0',
    'sad', 1, 'a@b', -999999999.999, 0,
    'ÿ', 'a:*',
    '(NaN,Infinity)', '{0,1,-1}', '[(0,0),(0,0)]', '(0,0),(0,0)', '[(0,0)]', '((1,1))',
    '<(0,0),Infinity>', ROW(-1, NULL), '[-2147483648,2147483647)', '[-1,-1]', 'empty',
    '{(,)}', 'FFFFFFFF/FFFFFFFF',
    '{NULL,-1,2147483647}', '{{{1,2}},{{3,4}}}', '{NULL,"NULL",null}', '{NULL,0.00}', '{NaN,Infinity,-Infinity}',
    '{infinity,-infinity,NULL}', '{NULL}', '{NULL,"\\x"}', '{NULL}', '{NaN,Infinity,-Infinity,NULL}',
    '{infinity,-infinity}', '{"-178000000 years"}', '{NULL}', '{NULL,ok}', '{null,"\"s\""}', '{NULL}');

-- 5: extreme dates and timestamps within PostgreSQL's range, tiny numerics, shapes of arrays
INSERT INTO firn_type_corpus VALUES (5,
    true, 0, 0, 0, '-0', 'NaN',
    0.01, 0.0000000001, 0, 'NaN',
    0.00001, 0,
    'z', 'z', 'z', 'z', 'z', 'z',
    '\x00', '123e4567-e89b-12d3-a456-426614174000', '4713-01-01 BC', '00:00:00', '00:00:00-15:59',
    '4713-01-01 00:00:00 BC', '4713-01-01 00:00:00+00 BC', '294276-12-31 23:59:59.999',
    '0',
    '{}', '{"a": 0.1000000000000000055511151231257827}', '<e/>', '1.2.3.4', '1.2.3.4/32',
    '01:02:03:04:05:06', '01:02:03:04:05:06:07:08', B'0101', B'010101010101010101010101010101',
    'ok', 7, 'x@y', 0.001, 1,
    'a:1A b:2B', 'a <-> b',
    '(0,0)', '{0,1,0}', '[(0,0),(0,1)]', '(0,1),(0,0)', '[(0,0),(0,1)]', '((0,0),(0,1))',
    '<(0,0),1>', ROW(0, 'a,b'), '[0,1)', '[0,0]', '[2024-01-01 00:00+00,infinity)',
    '{[2024-01-01,)}', '0/1',
    '[0:2]={7,8,9}', '{7,8}', '{x}', '{{1.00,2.00},{3.00,4.00}}', '{1e-20}', '{"294276-12-31 23:59:59.999999+00"}',
    '{}', '{}', '{}', '{}', '{5874897-12-31,4713-01-01 BC}', '{}', '{}', '{}', '{}', '{}');

-- 6: the last timestamp PostgreSQL accepts (beyond the int64 microsecond range from 1970)
INSERT INTO firn_type_corpus (id, c_ts, c_tstz, c_date) VALUES (6, '294276-12-31 23:59:59.999999',
    '294276-12-31 23:59:59.999999+00', '5874897-12-31');

-- 7: literals that are tricky in text form (the text decoder must equal the binary one): BC
-- timestamps with fractions, intervals with mixed signs and the int64 extreme, quoting and
-- escapes in arrays, lower bounds, box[] (';' delimiter), money arrays, denormal floats
INSERT INTO firn_type_corpus (id, c_float4, c_float8, c_num_10_2, c_num_38_10, c_money, c_text,
    c_varchar, c_bytea, c_date, c_time, c_ts, c_tstz, c_interval, c_jsonb, c_int4_arr, c_int2d,
    c_text_arr, c_numx_arr, c_bytea_arr, c_float8_arr, c_date_arr, c_interval_arr, c_tstz_arr,
    c_box_arr, c_money_arr, c_text2d)
VALUES (7, '1e-45', '5e-324', -0.5, -0.0000000001, -1234.56, E'{"x", \\y}',
    E'a\\b"c', '\x5c78', '0001-12-31 BC', '00:00:00.000001', '0044-03-15 12:34:56.789 BC',
    '0044-03-15 12:34:56.789+05 BC', '-1 years -2 mons +3 days -04:05:06.789',
    '{"a": "x\"y", "b": [1e100, -0.0]}', '[0:1][1:2]={{1,2},{3,4}}', '[2:3]={5,6}',
    E'{"back\\\\slash","{br}","  sp  ","semi;colon","","quote\\"d",NULL}', '{-0.000010,1e20}',
    '{"\\x5c22",NULL}', '{0.1,1e-300,-1.5e300}', '{0044-03-15 BC,2000-02-29}',
    '{"1 mon -1 days +00:00:01.5","-2562047788 hours -54.775808 seconds","2562047788 hours 54.775807 seconds"}',
    '{"1900-01-01 00:00:00.000001+00","0001-01-01 00:00:00+00 BC"}',
    '{(1,1),(0,0);(2.5,2.5),(-1,-1)}', '{-1.05,0,NULL,"$92,233,720,368,547,758.07"}',
    '{{"a,b",NULL},{"\"","}"}}');

-- 8, 9: int2vector and oidvector (text form "1 2 3", lower bound 0), an empty vector, and an
-- array of int2vector (stored as its text form)
INSERT INTO firn_type_corpus (id, c_int2vec, c_oidvec, c_int2vec_arr)
VALUES (8, '1 -2 32767 -32768', '0 4294967295 7', ARRAY['1 2', '3']::int2vector[]),
       (9, '', '', '{}');

-- 10: an array of a type whose typdelim is ';' (commas inside elements need no quotes)
INSERT INTO firn_type_corpus (id, c_semi_arr) VALUES (10, '{a,b;"c;d";NULL;" e "}');
