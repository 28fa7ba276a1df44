-- Recall (issue 27): the redacted conversations compactd summarized for wire requests, per
-- tenant, searchable until they expire (COMPACTD_RECALL_RETENTION).
create table recalls (
    id text primary key,
    tenant text not null,
    source text not null,
    created_at_ms bigint not null,
    expires_at_ms bigint not null
);
create index recalls_expiry on recalls (expires_at_ms);

create table recall_turns (
    recall_id text not null references recalls (id) on delete cascade,
    tenant text not null,
    seq integer not null,
    role text not null,
    tool text,
    paths text not null default '',
    text text not null,
    -- The text as PostgreSQL's parser reads it (a path is one token), and again with path and
    -- identifier marks as spaces, so that a part of a path ("blob" of vendor/blob.bin) is a
    -- word too, as SQLite's FTS5 tokenizer reads it.
    search tsvector generated always as (
        to_tsvector('simple', paths || ' ' || text)
        || to_tsvector('simple', translate(paths || ' ' || text, '/._-', '    '))
    ) stored,
    primary key (recall_id, seq)
);
create index recall_turns_search on recall_turns using gin (search);
create index recall_turns_tenant on recall_turns (tenant);
