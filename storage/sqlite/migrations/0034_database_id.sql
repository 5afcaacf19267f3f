-- Which database this is: a random id, made once with the schema (or here, for a
-- database made before it) and never changed. A backup is a copy of the file and
-- carries it, and a restore keeps it, so every earlier copy of a database has that
-- database's id, and a backup can tell an earlier copy, which it may write over, from
-- another hookdedup database of the same schema, which it must not: their delivery ids
-- alone cannot, as another database that issued fewer looks like an earlier copy.
INSERT INTO settings (name, value) VALUES ('database_id', lower(hex(randomblob(16))))
ON CONFLICT (name) DO NOTHING;
