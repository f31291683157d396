-- The floor of a single-op push on PostgreSQL (issue 52, part 3): the statements one push of one
-- op runs, with the same tables, indexes and statement shapes, and nothing else (no HTTP, no JSON
-- decoding, no Swift). Paths are under Sources/.
--
--   psql "$URL" -v ON_ERROR_STOP=1 -f Tools/bench-files/push-floor-setup.sql   # before each run
--   pgbench -n -M prepared -f Tools/bench-files/push-floor.sql -c N -j 2 -T S "$URL"
--
-- -M prepared: the server runs both statements as prepared statements (PlannedStatement.swift:
-- 4-22; a group of one push is within `largestPreparedGroup`, PostgresSyncStorage+Push.swift:
-- 125-128), a Bind and an Execute per run, the plan cached per connection. Without it pgbench parses and plans each statement every time.
--
-- One script run (one pgbench "transaction") = one push, as the server runs it when nothing else
-- pushes to the suite (the optimistic path): two statements on one pooled connection, each in a
-- transaction of its own; there is no BEGIN/COMMIT
-- (GroupDefaultsServer/Storage/Postgres/PostgresSyncStorage+Push.swift:23-25, 170-182).
--
-- What the push is (as the server benchmark's single-op pushes, groupdefaults-bench/Server/
-- Wrk.swift:115-123): one account and one token for every client; one plain value of 60 bytes
-- ({"string":"vvv…"}, 73 bytes of typed JSON); the device's id and a fresh batch id (so no
-- recorded batch: a first push of that id); a key `t<client>-<n>` from 1,000 per client.
-- Differences from that benchmark: each pgbench client pushes into a suite of its own,
-- `bench.floor-c<client_id>` (wrk pushes every connection into one suite, where the server's group
-- commit, PushGroups.swift, makes one write of several pushes; pgbench cannot), and the key is
-- random among the client's 1,000 rather than cycled.
--
-- Line by line (script part → server):
--   \set k / device / batch      the request: key, device_id, batch_id (Wrk.swift:120-122; device =
--                                the wrk thread, here the client).
--   SELECT … FROM ( … ) r \gset  SuiteReadStatement, GroupDefaultsServer/Storage/Postgres/
--                                PushStatements.swift:29-45, run at PostgresSyncStorage+Push.swift:
--                                173, 264-277 with the bindings of PushStatements.swift:55-63
--                                ($1 account, $2 suite, $3 keys, $4 devices, $5 batch ids). The
--                                inner SELECT is that statement, word for word, with pgbench values
--                                for its parameters; the outer aggregate (and clock_timestamp, for
--                                the HLC) only fold its rows into the one row \gset needs, where
--                                the server decodes them in Swift (Push.swift:283-301).
--   \set rev … hlc               The push step in Swift (Push.swift:307-379; PushStep.swift:155-162:
--                                head + 1, live keys, quota bytes = key bytes + value JSON bytes;
--                                the HLC as wrk makes it, milliseconds << 16 | counter).
--   \set depth 10                SuiteQuota.historyDepth, default 10 (GroupDefaultsServer/Storage/
--                                SyncStore.swift:13), bound as $25.
--   \set tokens 1 / members 0    $36 and $39 (PushStatements.swift:195, 198): one token, no member.
--   WITH authorized …            GroupWriteStatement, PushStatements.swift:90-141, run at
--                                Push.swift:177, 382-410, bindings PushStatements.swift:164-200:
--     authorized                   PushStatements.swift:91-96 ($35 token ids, $37 the owner's
--                                  incarnation, $38 member accounts: none), the token's and the
--                                  incarnation's rows locked FOR KEY SHARE (PushAuthority.swift).
--     guarded                      PushStatements.swift:97-103, the suite's counters on condition
--                                  that head and epoch are those read ($3-$8).
--     changed, upserted            PushStatements.swift:104-114, the entry ($9-$16, $33).
--     new, inserted                PushStatements.swift:115-122, the history version ($17-$24, $34).
--     added, doomed, trimmed       PushStatements.swift:123-132, the key's history trimmed to $25.
--     recorded                     PushStatements.swift:133-136, the batch record (idempotency:
--                                  device, batch id, the ops' SHA-256 in hex, the response JSON as
--                                  WireJSON.encode writes it; $26-$29).
--     notified                     PushStatements.swift:137-139, pg_notify on 'groupdefaults'
--                                  (ChangeListener.swift:14) with the ChangeNotice JSON
--                                  (Push.swift:383-386); $30-$32.
--     final SELECT                 PushStatements.swift:140 (the guarded row count; named here for
--                                  \gset).
--   \if :guarded = 0 …           The server would run the push again locked (Push.swift:26-28,
--                                186-210); here a suite that moved is an error, never a counted
--                                push that wrote nothing.
--
-- Values the server binds as parameters that are the same on every push (the account 'floor', the
-- token id, the incarnation id, the value, the digest, the channel, notify = true, the empty
-- member list) are literals here: pgbench's variables are numbers, and -D would be needed for text.
--
-- Not here, because the server does not run them per push once warm: the token lookup by hash
-- (PostgresSyncStorage+Tokens.swift:29; cached by Auth/Authenticator.swift:14-19 while the
-- listening connection listens), the account's incarnation (PostgresSyncStorage+Accounts.swift:
-- 31-37; cached, HTTP/AccountIncarnationCheck.swift:55-66), the storage incarnation (read once,
-- HTTP/IncarnationMiddleware.swift:25-30), and device sightings (HTTP/DeviceTracker.swift: one
-- synchronous INSERT … ON CONFLICT into devices, PostgresSyncStorage+Devices.swift:15-29, at a
-- device's first push to a suite, then at most one per device a second, flushed in the
-- background).
\set k random(1000, 1999)
\set device :client_id + 1
\set batch random(1, 9000000000000000000)
SELECT coalesce(max(r.head) FILTER (WHERE r.kind = 0), 0) AS head, coalesce(max(r.keys), 0) AS keys,
    coalesce(max(r.bytes), 0) AS bytes, coalesce(max(r.epoch) FILTER (WHERE r.kind = 0), 0) AS epoch,
    count(*) FILTER (WHERE r.kind = 1) AS held, (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
FROM (
    SELECT 0, NULL::text, NULL::text, NULL::bytea, epoch, false, mode_rev::text, NULL::text, head_rev, key_count, byte_count,
        NULL::text
    FROM suites WHERE account = 'floor' AND suite = 'bench.floor-c' || :client_id::text
    UNION ALL
    SELECT 1, e.key, e.value::text, e.sealed, e.epoch, e.deleted, e.hlc::text, e.origin::text, e.rev, NULL::bigint, NULL::bigint,
        e.pushed_by
    FROM unnest(ARRAY['t' || :client_id::text || '-' || :k::text]::text[]) AS k(key) CROSS JOIN LATERAL (
        SELECT * FROM entries WHERE account = 'floor' AND suite = 'bench.floor-c' || :client_id::text AND key = k.key LIMIT 1
    ) e
    UNION ALL
    SELECT 2, b.batch_id, b.response::text, NULL::bytea, NULL::bigint, false, b.ops_digest, b.device::text, NULL::bigint,
        NULL::bigint, NULL::bigint, NULL::text
    FROM unnest(ARRAY[:device::text]::text[], ARRAY['b' || :batch::text]::text[]) AS t(device, id) CROSS JOIN LATERAL (
        SELECT * FROM batches WHERE account = 'floor' AND suite = 'bench.floor-c' || :client_id::text
            AND device = t.device::numeric AND batch_id = t.id LIMIT 1
    ) b
) AS r(kind, key, value, sealed, epoch, deleted, hlc, origin, head, keys, bytes, pushed_by)
\gset
\set rev :head + 1
\set newkeys :keys + 1 - :held
\set keybytes 7 + (case when :client_id >= 10 then 1 else 0 end) + (case when :client_id >= 100 then 1 else 0 end)
\set newbytes :bytes + (1 - :held) * (:keybytes + 73)
\set hlc :now_ms * 65536 + :rev % 65536
\set depth 10
\set tokens 1
\set members 0
WITH authorized AS (
    SELECT (SELECT count(*) FROM (SELECT 1 FROM tokens WHERE id = ANY(ARRAY['tok_f100f100f100']::text[]) AND revoked IS NULL FOR KEY SHARE) t) = :tokens
        AND ('f100f100f100f100f100f100f100f100' = '' OR EXISTS (SELECT 1 FROM account_incarnations WHERE account = 'floor'
            AND id = 'f100f100f100f100f100f100f100f100' FOR KEY SHARE))
        AND (SELECT count(*) FROM (SELECT 1 FROM members WHERE owner = 'floor' AND suite = 'bench.floor-c' || :client_id::text
            AND account = ANY('{}'::text[])
            AND record->>'role' IN ('write', 'admin') AND coalesce((record->>'awaitingKeys')::boolean, false) = false
            FOR KEY SHARE) m) = :members AS ok
), guarded AS (
    INSERT INTO suites AS s (account, suite, head_rev, key_count, byte_count, epoch)
    SELECT 'floor', 'bench.floor-c' || :client_id::text, :rev, :newkeys, :newbytes, :epoch FROM authorized WHERE authorized.ok
    ON CONFLICT (account, suite) DO UPDATE SET head_rev = excluded.head_rev, key_count = excluded.key_count,
        byte_count = excluded.byte_count, epoch = excluded.epoch
    WHERE s.head_rev = :head AND s.epoch = :epoch
    RETURNING 1 AS ok
), changed AS (
    SELECT * FROM unnest(ARRAY['t' || :client_id::text || '-' || :k::text]::text[],
                         ARRAY['{"string":"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"}']::text[], ARRAY[false]::boolean[],
                         ARRAY[:hlc::text]::text[], ARRAY[:device::text]::text[], ARRAY[:rev::bigint]::bigint[], ARRAY['']::text[],
                         ARRAY[0]::bigint[], ARRAY['']::text[]) AS t(k, v, d, h, o, r, s, e, p)
), upserted AS (
    INSERT INTO entries (account, suite, key, value, sealed, epoch, deleted, hlc, origin, rev, pushed_by)
    SELECT 'floor', 'bench.floor-c' || :client_id::text, k, CASE WHEN d OR s <> '' THEN NULL ELSE v::json END,
        CASE WHEN s = '' THEN NULL ELSE decode(s, 'base64') END, NULLIF(e, 0), d, h::numeric, o::numeric, r, NULLIF(p, '')
    FROM changed, guarded
    ON CONFLICT (account, suite, key) DO UPDATE
        SET value = excluded.value, sealed = excluded.sealed, epoch = excluded.epoch, deleted = excluded.deleted,
            hlc = excluded.hlc, origin = excluded.origin, rev = excluded.rev, pushed_by = excluded.pushed_by
), new AS (
    SELECT * FROM unnest(ARRAY['t' || :client_id::text || '-' || :k::text]::text[],
                         ARRAY['{"string":"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"}']::text[], ARRAY[false]::boolean[],
                         ARRAY[:hlc::text]::text[], ARRAY[:device::text]::text[], ARRAY[:rev::bigint]::bigint[], ARRAY['']::text[],
                         ARRAY[0]::bigint[], ARRAY['']::text[]) AS t(k, v, d, h, o, r, s, e, p)
), inserted AS (
    INSERT INTO history (account, suite, key, rev, value, sealed, epoch, deleted, hlc, origin, pushed_by)
    SELECT 'floor', 'bench.floor-c' || :client_id::text, k, r, CASE WHEN d OR s <> '' THEN NULL ELSE v::json END,
        CASE WHEN s = '' THEN NULL ELSE decode(s, 'base64') END, NULLIF(e, 0), d, h::numeric, o::numeric, NULLIF(p, '')
    FROM new, guarded
), added AS (
    SELECT k, count(*) AS n FROM new GROUP BY k
), doomed AS MATERIALIZED (
    SELECT old.ctid FROM added CROSS JOIN LATERAL (
        SELECT x.ctid, row_number() OVER (ORDER BY x.rev DESC) AS position FROM history x
        WHERE x.account = 'floor' AND x.suite = 'bench.floor-c' || :client_id::text AND x.key = added.k COLLATE "C"
    ) old
    WHERE old.position > :depth - added.n
), trimmed AS (
    DELETE FROM history WHERE ctid = ANY (ARRAY(SELECT ctid FROM doomed)) AND EXISTS (SELECT 1 FROM guarded)
), recorded AS (
    INSERT INTO batches (account, suite, device, batch_id, ops_digest, response)
    SELECT 'floor', 'bench.floor-c' || :client_id::text, d::numeric, b, g, r::json
    FROM unnest(ARRAY[:device::text]::text[], ARRAY['b' || :batch::text]::text[],
                ARRAY['9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08']::text[],
                ARRAY['{"head_rev":' || :rev::text || ',"results":[{"key":"t' || :client_id::text || '-' || :k::text
                      || '","status":"applied","winner":{"key":"t' || :client_id::text || '-' || :k::text
                      || '","value":{"string":"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"},"hlc":"' || :hlc::text
                      || '","origin":"' || :device::text || '","rev":' || :rev::text
                      || '}}],"server_time":"2026-01-01T00:00:00.000Z"}']::text[]) AS t(d, b, g, r), guarded
), notified AS (
    SELECT pg_notify('groupdefaults', '{"account":"floor","suite":"bench.floor-c' || :client_id::text || '","head":' || :rev::text || '}')
    FROM guarded WHERE true
)
SELECT (SELECT count(*) FROM guarded) AS guarded, (SELECT count(*) FROM notified) AS notified
\gset
\if :guarded = 0
SELECT 1 / 0 AS the_suite_moved_between_the_read_and_the_write;
\endif
