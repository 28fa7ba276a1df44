-- (SQLite flavour of the PostgreSQL migration of the same name.)
-- The web console: what its sessions list and compaction pages show without reading entries.

-- Compaction entries in the session (uploaded or written by compactd), kept with every append.
alter table sessions add column compaction_count bigint not null default 0;
update sessions set compaction_count = (
    select count(*) from entries e
    where e.session_id = sessions.session_id and e.entry_type = 'compaction'
);

-- Every summary of the compaction came from the summary cache (no model was paid for it).
alter table compactions add column cached boolean not null default 0;
