-- Every job is inserted, updated twice and deleted within the retention, and no update can be
-- HOT (status is in the partial indexes' predicates): dead rows pile up fast. PostgreSQL's
-- default waits for dead rows worth 20 % of the table, which with a week of finished jobs can
-- mean millions of them and long vacuums. Vacuum (and analyze) after 1 % instead.
ALTER TABLE starlette_jobs SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.01
);
