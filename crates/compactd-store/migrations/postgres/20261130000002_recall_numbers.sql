-- Recall's turns are keyed by their conversation's number, not its id (issue 26). The id is a
-- hash, so every turn written landed at a random place in the (recall_id, seq) index; numbers
-- grow, so turns are appended, and the id is looked up once per conversation, in `recalls`.
alter table recalls add column number bigint generated always as identity;
alter table recalls add constraint recalls_number unique (number);

alter table recall_turns add column recall_number bigint;
update recall_turns t set recall_number = r.number from recalls r where r.id = t.recall_id;
alter table recall_turns alter column recall_number set not null;
alter table recall_turns drop constraint recall_turns_pkey;
alter table recall_turns drop column recall_id;
alter table recall_turns add primary key (recall_number, seq);
alter table recall_turns add foreign key (recall_number) references recalls (number) on delete cascade;
