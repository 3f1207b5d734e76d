-- starlette-jobs 0010: a step's upstream and dependents are stored uncompressed
-- (docs/performance.md, "With workflows").

-- A step that waits for 10,000 others holds 80 kB of ids: compressing them (to about 40 %)
-- took ~7 ms of the insert of a 10,000-step workflow, to save 50 kB of TOAST per such step.
-- Out of line still, as any large value, without compression. Existing rows are left as they
-- are: this applies to values written from now on.
ALTER TABLE starlette_jobs
    ALTER COLUMN upstream SET STORAGE EXTERNAL,
    ALTER COLUMN dependents SET STORAGE EXTERNAL;
