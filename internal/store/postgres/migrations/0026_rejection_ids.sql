-- The values that name a refused request without being secret (its
-- provider's delivery id headers, the timestamp of its signature header,
-- the event id in a body that was read), one "name<TAB>value<LF>" line
-- each, so that GET /api/rejections?q= finds a value whole. NULL: none, or
-- a row recorded before.
ALTER TABLE rejections ADD COLUMN ids text;
