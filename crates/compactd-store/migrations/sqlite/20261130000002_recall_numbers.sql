-- Recall's turns are keyed by their conversation's number, not its id (issue 26). The id is a
-- hash, so every turn written landed at a random place in the (recall_id, seq) index: at the
-- peak most of the writer's time went to splitting and rewriting index pages all over the file
-- (and the WAL and checkpoints that carry them). Numbers grow, so turns are appended; the id is
-- looked up once per conversation, in `recalls`.
drop trigger recall_turns_ai;
drop trigger recall_turns_ad;

create table recalls_numbered (
    number integer primary key,
    id text not null unique,
    tenant text not null,
    source text not null,
    created_at_ms integer not null,
    expires_at_ms integer not null,
    session_id text
);
insert into recalls_numbered (number, id, tenant, source, created_at_ms, expires_at_ms, session_id)
    select rowid, id, tenant, source, created_at_ms, expires_at_ms, session_id from recalls;

create table recall_turns_numbered (
    recall_number integer not null references recalls_numbered (number) on delete cascade,
    tenant text not null,
    seq integer not null,
    role text not null,
    tool text,
    paths text not null default '',
    text text not null,
    primary key (recall_number, seq)
);
-- The turns keep their rowids: they are the keys of the full-text index (recall_fts).
insert into recall_turns_numbered (rowid, recall_number, tenant, seq, role, tool, paths, text)
    select t.rowid, r.rowid, t.tenant, t.seq, t.role, t.tool, t.paths, t.text
    from recall_turns t join recalls r on r.id = t.recall_id;

drop table recall_turns;
drop table recalls;
alter table recalls_numbered rename to recalls;
alter table recall_turns_numbered rename to recall_turns;
create index recalls_expiry on recalls (expires_at_ms);
create index recalls_session on recalls (session_id);

create trigger recall_turns_ai after insert on recall_turns begin
    insert into recall_fts (rowid, paths, text) values (new.rowid, new.paths, new.text);
end;
create trigger recall_turns_ad after delete on recall_turns begin
    insert into recall_fts (recall_fts, rowid, paths, text) values ('delete', old.rowid, old.paths, old.text);
end;
