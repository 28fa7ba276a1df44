-- Sessions that scale: per-entry facts derived once, when an entry arrives, so that appending,
-- planning and compacting a stored session read only what they need instead of re-parsing it
-- (see src/compaction/facts.rs and src/app/index.rs).
--
-- Rows stored before this migration have no facts yet: their session's facts_version stays 0 and
-- compactd derives them (from the raw lines, once) the first time the session is used, and in a
-- sweep at start-up.

-- The entry's resolved parent, by position (NULL for a root, or a link lenient reading cut).
alter table entries add column parent_seq bigint;
-- The message's role, for `message` entries.
alter table entries add column role text;
-- estimateTokens of the message the entry contributes to a context (NULL: it contributes none).
alter table entries add column tokens bigint;
-- calculateContextTokens of the message's usage, when the usage is valid.
alter table entries add column usage_tokens double precision;
-- The context estimate if this entry were the leaf: last valid usage + the estimate after it.
alter table entries add column ctx_usage double precision;
alter table entries add column ctx_trailing bigint not null default 0;
-- A compaction's firstKeptEntryId.
alter table entries add column first_kept_id text;

-- Which derivation of the facts the session's rows hold (0: none yet).
alter table sessions add column facts_version bigint not null default 0;
create index sessions_facts_version_idx on sessions (facts_version);
