-- Recall for stored sessions (issue 27): the entries a session compaction summarized are kept
-- as turns of one recall per session (their seq the entry's position in the session), without
-- an expiry; they go with the session when it is deleted.
alter table recalls add column session_id text;
create index recalls_session on recalls (session_id);
