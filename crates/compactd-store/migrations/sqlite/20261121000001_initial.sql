-- compactd's state, SQLite flavour of migrations/postgres (same tables, same columns).

create table sessions (
    session_id     text primary key,
    -- The `id` of the session header (not unique: a session may be uploaded twice).
    header_id      text not null,
    -- oh-my-pi's title slot line before the header, if any.
    title_line     text,
    header         text not null,
    source_version integer not null,
    leaf_id        text,
    entry_count    integer not null,
    byte_size      integer not null,
    context_tokens integer not null,
    created_at_ms  integer not null,
    updated_at_ms  integer not null
);
create index sessions_created_idx on sessions (created_at_ms, session_id);

create table entries (
    session_id text not null references sessions (session_id) on delete cascade,
    -- Position in the file, from 0: the append order.
    seq        integer not null,
    entry_id   text not null,
    parent_id  text,
    entry_type text not null,
    raw        text not null,
    constraint entries_pkey primary key (session_id, seq),
    constraint entries_session_entry_key unique (session_id, entry_id)
);

create table compactions (
    session_id          text not null references sessions (session_id) on delete cascade,
    entry_id            text not null,
    -- The leaf the compaction was made from (the entry's parent).
    leaf_id             text not null,
    first_kept_entry_id text not null,
    model               text not null,
    input_tokens        integer not null,
    output_tokens       integer not null,
    latency_ms          integer not null,
    tokens_before       integer not null,
    tokens_after        integer not null,
    summary             text not null,
    created_at_ms       integer not null,
    constraint compactions_pkey primary key (session_id, entry_id)
);

create table summarization_calls (
    call_id       integer primary key autoincrement,
    endpoint      text not null,
    session_id    text,
    model         text,
    outcome       text not null,
    status        integer not null,
    prompt_bytes  integer not null,
    summary_bytes integer not null,
    input_tokens  integer not null,
    output_tokens integer not null,
    latency_ms    integer not null,
    -- Only with COMPACTD_STORE_TEXT=true.
    prompt        text,
    summary       text,
    created_at_ms integer not null
);
create index summarization_calls_created_idx on summarization_calls (created_at_ms);
