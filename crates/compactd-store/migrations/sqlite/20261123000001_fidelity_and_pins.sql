-- (SQLite flavour of the PostgreSQL migration of the same name.)
-- The fidelity gate's report of each compaction compactd wrote (JSON), and text users pin to a
-- session: every later compaction carries each pin verbatim.
alter table compactions add column fidelity text;

create table pins (
    pin_id        text primary key,
    session_id    text not null references sessions (session_id) on delete cascade,
    text          text not null,
    created_at_ms integer not null
);
create index pins_session_idx on pins (session_id, created_at_ms);
