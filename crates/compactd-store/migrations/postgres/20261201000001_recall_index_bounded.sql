-- Recall indexes what fits (issue 52). PostgreSQL refuses a `tsvector` over 1 MB, and a refused
-- generated column failed the whole batch it was written in: one 120,000-word turn took other
-- tenants' conversations with it. A turn's text is kept whole; what is indexed of it is its first
-- 65,536 and last 32,768 characters when it is longer than 100,000 (the head says what ran, the
-- tail how it ended), and the first 8,192 characters of its paths. Measured on adversarial text
-- (unique words of supplementary-plane characters), that is at most ~560 KB of tsvector. SQLite
-- indexes the same (its migration of the same name): both stores find the same turns.
drop index recall_turns_search;
alter table recall_turns drop column search;
alter table recall_turns add column search tsvector generated always as (
    to_tsvector('simple', left(paths, 8192) || ' ' || case when length(text) > 100000
        then left(text, 65536) || ' ' || right(text, 32768) else text end)
    || to_tsvector('simple', translate(left(paths, 8192) || ' ' || case when length(text) > 100000
        then left(text, 65536) || ' ' || right(text, 32768) else text end, '/._-', '    '))
) stored;
create index recall_turns_search on recall_turns using gin (search);
