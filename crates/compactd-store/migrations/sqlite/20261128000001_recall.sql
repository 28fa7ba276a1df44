-- Recall (issue 27): the redacted conversations compactd summarized for wire requests, per
-- tenant, searchable until they expire (COMPACTD_RECALL_RETENTION).
create table recalls (
    id text primary key,
    tenant text not null,
    source text not null,
    created_at_ms integer not null,
    expires_at_ms integer not null
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
    primary key (recall_id, seq)
);

-- Full-text index over the turns (an external-content FTS5 table kept by triggers).
create virtual table recall_fts using fts5 (
    paths, text, content = 'recall_turns', content_rowid = 'rowid', tokenize = 'unicode61'
);
create trigger recall_turns_ai after insert on recall_turns begin
    insert into recall_fts (rowid, paths, text) values (new.rowid, new.paths, new.text);
end;
create trigger recall_turns_ad after delete on recall_turns begin
    insert into recall_fts (recall_fts, rowid, paths, text) values ('delete', old.rowid, old.paths, old.text);
end;
