-- compactd's state: uploaded sessions, their entries as raw JSON lines, the compaction entries
-- compactd wrote, and a log of summarization calls. Times are epoch milliseconds, as in the
-- SQLite schema, so that both backends share their queries.
--
-- Ids are opaque: they compare by bytes (collate "C"), which keeps index maintenance off the
-- locale machinery on uploads of tens of thousands of entries.

create table sessions (
    session_id     text collate "C" primary key,
    -- The `id` of the session header (not unique: a session may be uploaded twice).
    header_id      text not null,
    -- oh-my-pi's title slot line before the header, if any.
    title_line     text,
    header         text not null,
    source_version bigint not null,
    leaf_id        text,
    entry_count    bigint not null,
    byte_size      bigint not null,
    context_tokens bigint not null,
    created_at_ms  bigint not null,
    updated_at_ms  bigint not null
);
create index sessions_created_idx on sessions (created_at_ms, session_id);

create table entries (
    session_id text collate "C" not null references sessions (session_id) on delete cascade,
    -- Position in the file, from 0: the append order.
    seq        bigint not null,
    entry_id   text collate "C" not null,
    parent_id  text,
    entry_type text not null,
    raw        text not null,
    constraint entries_pkey primary key (session_id, seq),
    constraint entries_session_entry_key unique (session_id, entry_id)
);

create table compactions (
    session_id          text collate "C" not null references sessions (session_id) on delete cascade,
    entry_id            text collate "C" not null,
    -- The leaf the compaction was made from (the entry's parent).
    leaf_id             text not null,
    first_kept_entry_id text not null,
    model               text not null,
    input_tokens        bigint not null,
    output_tokens       bigint not null,
    latency_ms          bigint not null,
    tokens_before       bigint not null,
    tokens_after        bigint not null,
    summary             text not null,
    created_at_ms       bigint not null,
    constraint compactions_pkey primary key (session_id, entry_id)
);

create table summarization_calls (
    call_id       bigserial primary key,
    endpoint      text not null,
    session_id    text,
    model         text,
    outcome       text not null,
    status        bigint not null,
    prompt_bytes  bigint not null,
    summary_bytes bigint not null,
    input_tokens  bigint not null,
    output_tokens bigint not null,
    latency_ms    bigint not null,
    -- Only with COMPACTD_STORE_TEXT=true.
    prompt        text,
    summary       text,
    created_at_ms bigint not null
);
create index summarization_calls_created_idx on summarization_calls (created_at_ms);

-- lz4 compresses the raw lines several times faster than the default pglz; servers built without
-- it keep the default.
do $$
begin
    if exists (select 1 from pg_settings where name = 'default_toast_compression' and 'lz4' = any(enumvals)) then
        alter table entries alter column raw set compression lz4;
        alter table compactions alter column summary set compression lz4;
        alter table summarization_calls alter column prompt set compression lz4;
    end if;
end
$$;
