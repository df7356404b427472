-- W7 idemjob batch with the two-phase claim: claim(max_jobs => 100, lease
-- => true), then every attempt confirmed in one statement (begin_attempt
-- over the claimed ids, right before the provider's batch call), then one
-- complete_attempt per job pipelined in one transaction, as in
-- claim_batch_tx.sql (from which this file is made: the same claim line
-- with the ids as an array, and the same completes): 3 transactions and
-- about 3 round trips per 100 jobs.
\set n 0
SELECT count(*) AS n, (pg_catalog.array_agg(attempt_id))[1] AS id1, (pg_catalog.array_agg(attempt_id))[2] AS id2, (pg_catalog.array_agg(attempt_id))[3] AS id3, (pg_catalog.array_agg(attempt_id))[4] AS id4, (pg_catalog.array_agg(attempt_id))[5] AS id5, (pg_catalog.array_agg(attempt_id))[6] AS id6, (pg_catalog.array_agg(attempt_id))[7] AS id7, (pg_catalog.array_agg(attempt_id))[8] AS id8, (pg_catalog.array_agg(attempt_id))[9] AS id9, (pg_catalog.array_agg(attempt_id))[10] AS id10, (pg_catalog.array_agg(attempt_id))[11] AS id11, (pg_catalog.array_agg(attempt_id))[12] AS id12, (pg_catalog.array_agg(attempt_id))[13] AS id13, (pg_catalog.array_agg(attempt_id))[14] AS id14, (pg_catalog.array_agg(attempt_id))[15] AS id15, (pg_catalog.array_agg(attempt_id))[16] AS id16, (pg_catalog.array_agg(attempt_id))[17] AS id17, (pg_catalog.array_agg(attempt_id))[18] AS id18, (pg_catalog.array_agg(attempt_id))[19] AS id19, (pg_catalog.array_agg(attempt_id))[20] AS id20, (pg_catalog.array_agg(attempt_id))[21] AS id21, (pg_catalog.array_agg(attempt_id))[22] AS id22, (pg_catalog.array_agg(attempt_id))[23] AS id23, (pg_catalog.array_agg(attempt_id))[24] AS id24, (pg_catalog.array_agg(attempt_id))[25] AS id25, (pg_catalog.array_agg(attempt_id))[26] AS id26, (pg_catalog.array_agg(attempt_id))[27] AS id27, (pg_catalog.array_agg(attempt_id))[28] AS id28, (pg_catalog.array_agg(attempt_id))[29] AS id29, (pg_catalog.array_agg(attempt_id))[30] AS id30, (pg_catalog.array_agg(attempt_id))[31] AS id31, (pg_catalog.array_agg(attempt_id))[32] AS id32, (pg_catalog.array_agg(attempt_id))[33] AS id33, (pg_catalog.array_agg(attempt_id))[34] AS id34, (pg_catalog.array_agg(attempt_id))[35] AS id35, (pg_catalog.array_agg(attempt_id))[36] AS id36, (pg_catalog.array_agg(attempt_id))[37] AS id37, (pg_catalog.array_agg(attempt_id))[38] AS id38, (pg_catalog.array_agg(attempt_id))[39] AS id39, (pg_catalog.array_agg(attempt_id))[40] AS id40, (pg_catalog.array_agg(attempt_id))[41] AS id41, (pg_catalog.array_agg(attempt_id))[42] AS id42, (pg_catalog.array_agg(attempt_id))[43] AS id43, (pg_catalog.array_agg(attempt_id))[44] AS id44, (pg_catalog.array_agg(attempt_id))[45] AS id45, (pg_catalog.array_agg(attempt_id))[46] AS id46, (pg_catalog.array_agg(attempt_id))[47] AS id47, (pg_catalog.array_agg(attempt_id))[48] AS id48, (pg_catalog.array_agg(attempt_id))[49] AS id49, (pg_catalog.array_agg(attempt_id))[50] AS id50, (pg_catalog.array_agg(attempt_id))[51] AS id51, (pg_catalog.array_agg(attempt_id))[52] AS id52, (pg_catalog.array_agg(attempt_id))[53] AS id53, (pg_catalog.array_agg(attempt_id))[54] AS id54, (pg_catalog.array_agg(attempt_id))[55] AS id55, (pg_catalog.array_agg(attempt_id))[56] AS id56, (pg_catalog.array_agg(attempt_id))[57] AS id57, (pg_catalog.array_agg(attempt_id))[58] AS id58, (pg_catalog.array_agg(attempt_id))[59] AS id59, (pg_catalog.array_agg(attempt_id))[60] AS id60, (pg_catalog.array_agg(attempt_id))[61] AS id61, (pg_catalog.array_agg(attempt_id))[62] AS id62, (pg_catalog.array_agg(attempt_id))[63] AS id63, (pg_catalog.array_agg(attempt_id))[64] AS id64, (pg_catalog.array_agg(attempt_id))[65] AS id65, (pg_catalog.array_agg(attempt_id))[66] AS id66, (pg_catalog.array_agg(attempt_id))[67] AS id67, (pg_catalog.array_agg(attempt_id))[68] AS id68, (pg_catalog.array_agg(attempt_id))[69] AS id69, (pg_catalog.array_agg(attempt_id))[70] AS id70, (pg_catalog.array_agg(attempt_id))[71] AS id71, (pg_catalog.array_agg(attempt_id))[72] AS id72, (pg_catalog.array_agg(attempt_id))[73] AS id73, (pg_catalog.array_agg(attempt_id))[74] AS id74, (pg_catalog.array_agg(attempt_id))[75] AS id75, (pg_catalog.array_agg(attempt_id))[76] AS id76, (pg_catalog.array_agg(attempt_id))[77] AS id77, (pg_catalog.array_agg(attempt_id))[78] AS id78, (pg_catalog.array_agg(attempt_id))[79] AS id79, (pg_catalog.array_agg(attempt_id))[80] AS id80, (pg_catalog.array_agg(attempt_id))[81] AS id81, (pg_catalog.array_agg(attempt_id))[82] AS id82, (pg_catalog.array_agg(attempt_id))[83] AS id83, (pg_catalog.array_agg(attempt_id))[84] AS id84, (pg_catalog.array_agg(attempt_id))[85] AS id85, (pg_catalog.array_agg(attempt_id))[86] AS id86, (pg_catalog.array_agg(attempt_id))[87] AS id87, (pg_catalog.array_agg(attempt_id))[88] AS id88, (pg_catalog.array_agg(attempt_id))[89] AS id89, (pg_catalog.array_agg(attempt_id))[90] AS id90, (pg_catalog.array_agg(attempt_id))[91] AS id91, (pg_catalog.array_agg(attempt_id))[92] AS id92, (pg_catalog.array_agg(attempt_id))[93] AS id93, (pg_catalog.array_agg(attempt_id))[94] AS id94, (pg_catalog.array_agg(attempt_id))[95] AS id95, (pg_catalog.array_agg(attempt_id))[96] AS id96, (pg_catalog.array_agg(attempt_id))[97] AS id97, (pg_catalog.array_agg(attempt_id))[98] AS id98, (pg_catalog.array_agg(attempt_id))[99] AS id99, (pg_catalog.array_agg(attempt_id))[100] AS id100 , pg_catalog.array_agg(attempt_id) AS ids FROM idemjob.claim('w', NULL, 100, lease => true) \aset
\if :n > 0
SELECT count(*) AS confirmed FROM pg_catalog.unnest(:ids::pg_catalog.uuid[]) a, LATERAL idemjob.begin_attempt(a) b \aset
\endif
\startpipeline
BEGIN;
\if :n >= 1
SELECT outcome FROM idemjob.complete_attempt(:id1, '{"ok": true}');
\endif
\if :n >= 2
SELECT outcome FROM idemjob.complete_attempt(:id2, '{"ok": true}');
\endif
\if :n >= 3
SELECT outcome FROM idemjob.complete_attempt(:id3, '{"ok": true}');
\endif
\if :n >= 4
SELECT outcome FROM idemjob.complete_attempt(:id4, '{"ok": true}');
\endif
\if :n >= 5
SELECT outcome FROM idemjob.complete_attempt(:id5, '{"ok": true}');
\endif
\if :n >= 6
SELECT outcome FROM idemjob.complete_attempt(:id6, '{"ok": true}');
\endif
\if :n >= 7
SELECT outcome FROM idemjob.complete_attempt(:id7, '{"ok": true}');
\endif
\if :n >= 8
SELECT outcome FROM idemjob.complete_attempt(:id8, '{"ok": true}');
\endif
\if :n >= 9
SELECT outcome FROM idemjob.complete_attempt(:id9, '{"ok": true}');
\endif
\if :n >= 10
SELECT outcome FROM idemjob.complete_attempt(:id10, '{"ok": true}');
\endif
\if :n >= 11
SELECT outcome FROM idemjob.complete_attempt(:id11, '{"ok": true}');
\endif
\if :n >= 12
SELECT outcome FROM idemjob.complete_attempt(:id12, '{"ok": true}');
\endif
\if :n >= 13
SELECT outcome FROM idemjob.complete_attempt(:id13, '{"ok": true}');
\endif
\if :n >= 14
SELECT outcome FROM idemjob.complete_attempt(:id14, '{"ok": true}');
\endif
\if :n >= 15
SELECT outcome FROM idemjob.complete_attempt(:id15, '{"ok": true}');
\endif
\if :n >= 16
SELECT outcome FROM idemjob.complete_attempt(:id16, '{"ok": true}');
\endif
\if :n >= 17
SELECT outcome FROM idemjob.complete_attempt(:id17, '{"ok": true}');
\endif
\if :n >= 18
SELECT outcome FROM idemjob.complete_attempt(:id18, '{"ok": true}');
\endif
\if :n >= 19
SELECT outcome FROM idemjob.complete_attempt(:id19, '{"ok": true}');
\endif
\if :n >= 20
SELECT outcome FROM idemjob.complete_attempt(:id20, '{"ok": true}');
\endif
\if :n >= 21
SELECT outcome FROM idemjob.complete_attempt(:id21, '{"ok": true}');
\endif
\if :n >= 22
SELECT outcome FROM idemjob.complete_attempt(:id22, '{"ok": true}');
\endif
\if :n >= 23
SELECT outcome FROM idemjob.complete_attempt(:id23, '{"ok": true}');
\endif
\if :n >= 24
SELECT outcome FROM idemjob.complete_attempt(:id24, '{"ok": true}');
\endif
\if :n >= 25
SELECT outcome FROM idemjob.complete_attempt(:id25, '{"ok": true}');
\endif
\if :n >= 26
SELECT outcome FROM idemjob.complete_attempt(:id26, '{"ok": true}');
\endif
\if :n >= 27
SELECT outcome FROM idemjob.complete_attempt(:id27, '{"ok": true}');
\endif
\if :n >= 28
SELECT outcome FROM idemjob.complete_attempt(:id28, '{"ok": true}');
\endif
\if :n >= 29
SELECT outcome FROM idemjob.complete_attempt(:id29, '{"ok": true}');
\endif
\if :n >= 30
SELECT outcome FROM idemjob.complete_attempt(:id30, '{"ok": true}');
\endif
\if :n >= 31
SELECT outcome FROM idemjob.complete_attempt(:id31, '{"ok": true}');
\endif
\if :n >= 32
SELECT outcome FROM idemjob.complete_attempt(:id32, '{"ok": true}');
\endif
\if :n >= 33
SELECT outcome FROM idemjob.complete_attempt(:id33, '{"ok": true}');
\endif
\if :n >= 34
SELECT outcome FROM idemjob.complete_attempt(:id34, '{"ok": true}');
\endif
\if :n >= 35
SELECT outcome FROM idemjob.complete_attempt(:id35, '{"ok": true}');
\endif
\if :n >= 36
SELECT outcome FROM idemjob.complete_attempt(:id36, '{"ok": true}');
\endif
\if :n >= 37
SELECT outcome FROM idemjob.complete_attempt(:id37, '{"ok": true}');
\endif
\if :n >= 38
SELECT outcome FROM idemjob.complete_attempt(:id38, '{"ok": true}');
\endif
\if :n >= 39
SELECT outcome FROM idemjob.complete_attempt(:id39, '{"ok": true}');
\endif
\if :n >= 40
SELECT outcome FROM idemjob.complete_attempt(:id40, '{"ok": true}');
\endif
\if :n >= 41
SELECT outcome FROM idemjob.complete_attempt(:id41, '{"ok": true}');
\endif
\if :n >= 42
SELECT outcome FROM idemjob.complete_attempt(:id42, '{"ok": true}');
\endif
\if :n >= 43
SELECT outcome FROM idemjob.complete_attempt(:id43, '{"ok": true}');
\endif
\if :n >= 44
SELECT outcome FROM idemjob.complete_attempt(:id44, '{"ok": true}');
\endif
\if :n >= 45
SELECT outcome FROM idemjob.complete_attempt(:id45, '{"ok": true}');
\endif
\if :n >= 46
SELECT outcome FROM idemjob.complete_attempt(:id46, '{"ok": true}');
\endif
\if :n >= 47
SELECT outcome FROM idemjob.complete_attempt(:id47, '{"ok": true}');
\endif
\if :n >= 48
SELECT outcome FROM idemjob.complete_attempt(:id48, '{"ok": true}');
\endif
\if :n >= 49
SELECT outcome FROM idemjob.complete_attempt(:id49, '{"ok": true}');
\endif
\if :n >= 50
SELECT outcome FROM idemjob.complete_attempt(:id50, '{"ok": true}');
\endif
\if :n >= 51
SELECT outcome FROM idemjob.complete_attempt(:id51, '{"ok": true}');
\endif
\if :n >= 52
SELECT outcome FROM idemjob.complete_attempt(:id52, '{"ok": true}');
\endif
\if :n >= 53
SELECT outcome FROM idemjob.complete_attempt(:id53, '{"ok": true}');
\endif
\if :n >= 54
SELECT outcome FROM idemjob.complete_attempt(:id54, '{"ok": true}');
\endif
\if :n >= 55
SELECT outcome FROM idemjob.complete_attempt(:id55, '{"ok": true}');
\endif
\if :n >= 56
SELECT outcome FROM idemjob.complete_attempt(:id56, '{"ok": true}');
\endif
\if :n >= 57
SELECT outcome FROM idemjob.complete_attempt(:id57, '{"ok": true}');
\endif
\if :n >= 58
SELECT outcome FROM idemjob.complete_attempt(:id58, '{"ok": true}');
\endif
\if :n >= 59
SELECT outcome FROM idemjob.complete_attempt(:id59, '{"ok": true}');
\endif
\if :n >= 60
SELECT outcome FROM idemjob.complete_attempt(:id60, '{"ok": true}');
\endif
\if :n >= 61
SELECT outcome FROM idemjob.complete_attempt(:id61, '{"ok": true}');
\endif
\if :n >= 62
SELECT outcome FROM idemjob.complete_attempt(:id62, '{"ok": true}');
\endif
\if :n >= 63
SELECT outcome FROM idemjob.complete_attempt(:id63, '{"ok": true}');
\endif
\if :n >= 64
SELECT outcome FROM idemjob.complete_attempt(:id64, '{"ok": true}');
\endif
\if :n >= 65
SELECT outcome FROM idemjob.complete_attempt(:id65, '{"ok": true}');
\endif
\if :n >= 66
SELECT outcome FROM idemjob.complete_attempt(:id66, '{"ok": true}');
\endif
\if :n >= 67
SELECT outcome FROM idemjob.complete_attempt(:id67, '{"ok": true}');
\endif
\if :n >= 68
SELECT outcome FROM idemjob.complete_attempt(:id68, '{"ok": true}');
\endif
\if :n >= 69
SELECT outcome FROM idemjob.complete_attempt(:id69, '{"ok": true}');
\endif
\if :n >= 70
SELECT outcome FROM idemjob.complete_attempt(:id70, '{"ok": true}');
\endif
\if :n >= 71
SELECT outcome FROM idemjob.complete_attempt(:id71, '{"ok": true}');
\endif
\if :n >= 72
SELECT outcome FROM idemjob.complete_attempt(:id72, '{"ok": true}');
\endif
\if :n >= 73
SELECT outcome FROM idemjob.complete_attempt(:id73, '{"ok": true}');
\endif
\if :n >= 74
SELECT outcome FROM idemjob.complete_attempt(:id74, '{"ok": true}');
\endif
\if :n >= 75
SELECT outcome FROM idemjob.complete_attempt(:id75, '{"ok": true}');
\endif
\if :n >= 76
SELECT outcome FROM idemjob.complete_attempt(:id76, '{"ok": true}');
\endif
\if :n >= 77
SELECT outcome FROM idemjob.complete_attempt(:id77, '{"ok": true}');
\endif
\if :n >= 78
SELECT outcome FROM idemjob.complete_attempt(:id78, '{"ok": true}');
\endif
\if :n >= 79
SELECT outcome FROM idemjob.complete_attempt(:id79, '{"ok": true}');
\endif
\if :n >= 80
SELECT outcome FROM idemjob.complete_attempt(:id80, '{"ok": true}');
\endif
\if :n >= 81
SELECT outcome FROM idemjob.complete_attempt(:id81, '{"ok": true}');
\endif
\if :n >= 82
SELECT outcome FROM idemjob.complete_attempt(:id82, '{"ok": true}');
\endif
\if :n >= 83
SELECT outcome FROM idemjob.complete_attempt(:id83, '{"ok": true}');
\endif
\if :n >= 84
SELECT outcome FROM idemjob.complete_attempt(:id84, '{"ok": true}');
\endif
\if :n >= 85
SELECT outcome FROM idemjob.complete_attempt(:id85, '{"ok": true}');
\endif
\if :n >= 86
SELECT outcome FROM idemjob.complete_attempt(:id86, '{"ok": true}');
\endif
\if :n >= 87
SELECT outcome FROM idemjob.complete_attempt(:id87, '{"ok": true}');
\endif
\if :n >= 88
SELECT outcome FROM idemjob.complete_attempt(:id88, '{"ok": true}');
\endif
\if :n >= 89
SELECT outcome FROM idemjob.complete_attempt(:id89, '{"ok": true}');
\endif
\if :n >= 90
SELECT outcome FROM idemjob.complete_attempt(:id90, '{"ok": true}');
\endif
\if :n >= 91
SELECT outcome FROM idemjob.complete_attempt(:id91, '{"ok": true}');
\endif
\if :n >= 92
SELECT outcome FROM idemjob.complete_attempt(:id92, '{"ok": true}');
\endif
\if :n >= 93
SELECT outcome FROM idemjob.complete_attempt(:id93, '{"ok": true}');
\endif
\if :n >= 94
SELECT outcome FROM idemjob.complete_attempt(:id94, '{"ok": true}');
\endif
\if :n >= 95
SELECT outcome FROM idemjob.complete_attempt(:id95, '{"ok": true}');
\endif
\if :n >= 96
SELECT outcome FROM idemjob.complete_attempt(:id96, '{"ok": true}');
\endif
\if :n >= 97
SELECT outcome FROM idemjob.complete_attempt(:id97, '{"ok": true}');
\endif
\if :n >= 98
SELECT outcome FROM idemjob.complete_attempt(:id98, '{"ok": true}');
\endif
\if :n >= 99
SELECT outcome FROM idemjob.complete_attempt(:id99, '{"ok": true}');
\endif
\if :n >= 100
SELECT outcome FROM idemjob.complete_attempt(:id100, '{"ok": true}');
\endif
COMMIT;
\endpipeline
