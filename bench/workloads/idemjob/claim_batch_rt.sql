-- W7 idemjob batch, 101 round trips: claim(max_jobs => 100) in one
-- transaction, then one complete_attempt per claimed job, each its own
-- transaction (as a worker does it).  The 100 blocks below are generated (a shell loop).
\set n 0
SELECT count(*) AS n, array_agg(attempt_id)::text AS ids FROM idemjob.claim('w', NULL, 100) \aset
\if :n >= 1
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[1], '{"ok": true}') \aset
\endif
\if :n >= 2
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[2], '{"ok": true}') \aset
\endif
\if :n >= 3
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[3], '{"ok": true}') \aset
\endif
\if :n >= 4
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[4], '{"ok": true}') \aset
\endif
\if :n >= 5
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[5], '{"ok": true}') \aset
\endif
\if :n >= 6
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[6], '{"ok": true}') \aset
\endif
\if :n >= 7
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[7], '{"ok": true}') \aset
\endif
\if :n >= 8
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[8], '{"ok": true}') \aset
\endif
\if :n >= 9
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[9], '{"ok": true}') \aset
\endif
\if :n >= 10
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[10], '{"ok": true}') \aset
\endif
\if :n >= 11
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[11], '{"ok": true}') \aset
\endif
\if :n >= 12
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[12], '{"ok": true}') \aset
\endif
\if :n >= 13
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[13], '{"ok": true}') \aset
\endif
\if :n >= 14
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[14], '{"ok": true}') \aset
\endif
\if :n >= 15
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[15], '{"ok": true}') \aset
\endif
\if :n >= 16
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[16], '{"ok": true}') \aset
\endif
\if :n >= 17
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[17], '{"ok": true}') \aset
\endif
\if :n >= 18
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[18], '{"ok": true}') \aset
\endif
\if :n >= 19
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[19], '{"ok": true}') \aset
\endif
\if :n >= 20
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[20], '{"ok": true}') \aset
\endif
\if :n >= 21
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[21], '{"ok": true}') \aset
\endif
\if :n >= 22
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[22], '{"ok": true}') \aset
\endif
\if :n >= 23
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[23], '{"ok": true}') \aset
\endif
\if :n >= 24
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[24], '{"ok": true}') \aset
\endif
\if :n >= 25
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[25], '{"ok": true}') \aset
\endif
\if :n >= 26
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[26], '{"ok": true}') \aset
\endif
\if :n >= 27
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[27], '{"ok": true}') \aset
\endif
\if :n >= 28
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[28], '{"ok": true}') \aset
\endif
\if :n >= 29
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[29], '{"ok": true}') \aset
\endif
\if :n >= 30
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[30], '{"ok": true}') \aset
\endif
\if :n >= 31
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[31], '{"ok": true}') \aset
\endif
\if :n >= 32
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[32], '{"ok": true}') \aset
\endif
\if :n >= 33
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[33], '{"ok": true}') \aset
\endif
\if :n >= 34
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[34], '{"ok": true}') \aset
\endif
\if :n >= 35
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[35], '{"ok": true}') \aset
\endif
\if :n >= 36
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[36], '{"ok": true}') \aset
\endif
\if :n >= 37
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[37], '{"ok": true}') \aset
\endif
\if :n >= 38
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[38], '{"ok": true}') \aset
\endif
\if :n >= 39
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[39], '{"ok": true}') \aset
\endif
\if :n >= 40
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[40], '{"ok": true}') \aset
\endif
\if :n >= 41
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[41], '{"ok": true}') \aset
\endif
\if :n >= 42
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[42], '{"ok": true}') \aset
\endif
\if :n >= 43
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[43], '{"ok": true}') \aset
\endif
\if :n >= 44
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[44], '{"ok": true}') \aset
\endif
\if :n >= 45
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[45], '{"ok": true}') \aset
\endif
\if :n >= 46
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[46], '{"ok": true}') \aset
\endif
\if :n >= 47
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[47], '{"ok": true}') \aset
\endif
\if :n >= 48
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[48], '{"ok": true}') \aset
\endif
\if :n >= 49
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[49], '{"ok": true}') \aset
\endif
\if :n >= 50
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[50], '{"ok": true}') \aset
\endif
\if :n >= 51
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[51], '{"ok": true}') \aset
\endif
\if :n >= 52
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[52], '{"ok": true}') \aset
\endif
\if :n >= 53
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[53], '{"ok": true}') \aset
\endif
\if :n >= 54
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[54], '{"ok": true}') \aset
\endif
\if :n >= 55
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[55], '{"ok": true}') \aset
\endif
\if :n >= 56
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[56], '{"ok": true}') \aset
\endif
\if :n >= 57
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[57], '{"ok": true}') \aset
\endif
\if :n >= 58
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[58], '{"ok": true}') \aset
\endif
\if :n >= 59
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[59], '{"ok": true}') \aset
\endif
\if :n >= 60
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[60], '{"ok": true}') \aset
\endif
\if :n >= 61
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[61], '{"ok": true}') \aset
\endif
\if :n >= 62
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[62], '{"ok": true}') \aset
\endif
\if :n >= 63
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[63], '{"ok": true}') \aset
\endif
\if :n >= 64
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[64], '{"ok": true}') \aset
\endif
\if :n >= 65
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[65], '{"ok": true}') \aset
\endif
\if :n >= 66
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[66], '{"ok": true}') \aset
\endif
\if :n >= 67
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[67], '{"ok": true}') \aset
\endif
\if :n >= 68
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[68], '{"ok": true}') \aset
\endif
\if :n >= 69
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[69], '{"ok": true}') \aset
\endif
\if :n >= 70
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[70], '{"ok": true}') \aset
\endif
\if :n >= 71
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[71], '{"ok": true}') \aset
\endif
\if :n >= 72
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[72], '{"ok": true}') \aset
\endif
\if :n >= 73
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[73], '{"ok": true}') \aset
\endif
\if :n >= 74
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[74], '{"ok": true}') \aset
\endif
\if :n >= 75
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[75], '{"ok": true}') \aset
\endif
\if :n >= 76
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[76], '{"ok": true}') \aset
\endif
\if :n >= 77
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[77], '{"ok": true}') \aset
\endif
\if :n >= 78
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[78], '{"ok": true}') \aset
\endif
\if :n >= 79
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[79], '{"ok": true}') \aset
\endif
\if :n >= 80
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[80], '{"ok": true}') \aset
\endif
\if :n >= 81
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[81], '{"ok": true}') \aset
\endif
\if :n >= 82
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[82], '{"ok": true}') \aset
\endif
\if :n >= 83
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[83], '{"ok": true}') \aset
\endif
\if :n >= 84
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[84], '{"ok": true}') \aset
\endif
\if :n >= 85
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[85], '{"ok": true}') \aset
\endif
\if :n >= 86
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[86], '{"ok": true}') \aset
\endif
\if :n >= 87
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[87], '{"ok": true}') \aset
\endif
\if :n >= 88
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[88], '{"ok": true}') \aset
\endif
\if :n >= 89
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[89], '{"ok": true}') \aset
\endif
\if :n >= 90
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[90], '{"ok": true}') \aset
\endif
\if :n >= 91
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[91], '{"ok": true}') \aset
\endif
\if :n >= 92
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[92], '{"ok": true}') \aset
\endif
\if :n >= 93
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[93], '{"ok": true}') \aset
\endif
\if :n >= 94
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[94], '{"ok": true}') \aset
\endif
\if :n >= 95
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[95], '{"ok": true}') \aset
\endif
\if :n >= 96
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[96], '{"ok": true}') \aset
\endif
\if :n >= 97
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[97], '{"ok": true}') \aset
\endif
\if :n >= 98
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[98], '{"ok": true}') \aset
\endif
\if :n >= 99
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[99], '{"ok": true}') \aset
\endif
\if :n >= 100
SELECT outcome FROM idemjob.complete_attempt((:ids::uuid[])[100], '{"ok": true}') \aset
\endif
