-- The rows push-floor.sql needs, on a database the server has migrated (groupdefaults-server
-- migrates its schema at start: PostgresMigrations.swift, migrations 1–14). Run it before each
-- floor run, so that every run starts from the same empty suites:
--
--   psql "$URL" -v ON_ERROR_STOP=1 -f Tools/bench-files/push-floor-setup.sql
--
-- An account of its own, `floor`, so that it can share the database of a server benchmark run
-- (whose account is `bench`) without touching its rows. What the server's `token create
-- --create --account floor` would write (PostgresSyncStorage+Tokens.swift:11-20): the account's
-- incarnation and one token (its id and incarnation fixed: push-floor.sql names them), and one
-- suite per pgbench client, `bench.floor-c<client_id>`, for up to 100 clients (the benchmark's
-- largest connection count). A client beyond that pushes into a suite its first push creates, as
-- the server's write does for a new suite (PushStatements.swift:98-102).
--
-- Inserting the token fires migration 4's trigger (a `tokens` notification): a server running on
-- the same database drops its token cache once.

BEGIN;
DELETE FROM entries WHERE account = 'floor';
DELETE FROM history WHERE account = 'floor';
DELETE FROM batches WHERE account = 'floor';
DELETE FROM devices WHERE account = 'floor';
DELETE FROM suites WHERE account = 'floor';
DELETE FROM tokens WHERE account = 'floor';
DELETE FROM account_incarnations WHERE account = 'floor';

INSERT INTO account_incarnations (account, id) VALUES ('floor', 'f100f100f100f100f100f100f100f100');
INSERT INTO tokens (id, account, patterns, read_only, device, created, expires, revoked, hash)
VALUES ('tok_f100f100f100', 'floor', '{*}', false, NULL, now(), NULL, NULL, encode(sha256('gdt_push-floor'), 'hex'));
INSERT INTO suites (account, suite)
SELECT 'floor', 'bench.floor-c' || n FROM generate_series(0, 99) AS n;
COMMIT;
