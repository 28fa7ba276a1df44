-- Recall indexes what fits (issue 52), as on PostgreSQL (its migration of the same name, which
-- says why): a turn longer than 100,000 characters is indexed by its first 65,536 and last
-- 32,768, its paths by their first 8,192; the stored text stays whole. The index reads its
-- content through a view of exactly that, so that snippets are cut from the text the index saw.
create view recall_turns_indexed as
    select rowid as turn_id, substr(paths, 1, 8192) as paths,
        case when length(text) > 100000
            then substr(text, 1, 65536) || ' ' || substr(text, -32768) else text end as text
    from recall_turns;

drop trigger recall_turns_ad;
drop table recall_fts;
create virtual table recall_fts using fts5 (
    paths, text, content = 'recall_turns_indexed', content_rowid = 'turn_id', tokenize = 'unicode61'
);
-- As 20261130000001 set it.
insert into recall_fts (recall_fts, rank) values ('automerge', 16);
insert into recall_fts (recall_fts) values ('rebuild');
create trigger recall_turns_ad after delete on recall_turns begin
    insert into recall_fts (recall_fts, rowid, paths, text) values ('delete', old.rowid,
        substr(old.paths, 1, 8192),
        case when length(old.text) > 100000
            then substr(old.text, 1, 65536) || ' ' || substr(old.text, -32768) else old.text end);
end;
