#!/usr/bin/env sysbench
-- bench/split.lua: the direct-split ceiling of bench/run.sh (path "split").
--
-- sysbench's oltp_read_only (or oltp_point_select) run directly on one MariaDB,
-- but against a hash split of each table, as the sharded proxy runs it: table
-- sbtestN is split into sbtestN_0000 .. sbtestN_<parts-1> (kingshard's
-- subtable names), row id living in part id % parts (kingshard's hash rule for
-- integer keys: value mod number of subtables).
--
--   * a point select goes to the one part id % parts;
--   * every range query (simple, sum, order, distinct) runs on ALL parts, one
--     after another on the same connection (no merging: the client gets one
--     result set per part).
--
-- Options, defaults, random ids (sysbench.rand.default over 1..table_size,
-- sysbench.rand.uniform over 1..tables), the order in which they are drawn and
-- statement preparation (con:prepare + bind, so --db-ps-mode=disable and auto
-- both work) follow sysbench 1.0.20's oltp_common.lua and oltp_read_only.lua /
-- oltp_point_select.lua. The split itself is made by bench/run.sh (CREATE TABLE
-- ... LIKE and INSERT ... SELECT ... WHERE id % parts = n); this script only
-- runs it:
--
--   sysbench bench/split.lua --mysql-db=sbsplit --split-test=oltp_read_only run
--
-- sysbench counts every statement as a query, so a range query here counts
-- `parts` times: compare this path with others by transactions per second
-- (one transaction per event, also with --skip-trx=on), not by queries.

if sysbench.cmdline.command == nil then
   error("Command is required. Supported commands: run, help")
end

sysbench.cmdline.options = {
   split_test =
      {"Which sysbench test to mirror: oltp_read_only or oltp_point_select " ..
          "(one point select per event)", "oltp_read_only"},
   parts =
      {"Number of parts (subtables) each table is split into", 4},
   table_size =
      {"Number of rows per table", 10000},
   range_size =
      {"Range size for range SELECT queries", 100},
   tables =
      {"Number of tables", 1},
   point_selects =
      {"Number of point SELECT queries per transaction", 10},
   simple_ranges =
      {"Number of simple range SELECT queries per transaction", 1},
   sum_ranges =
      {"Number of SELECT SUM() queries per transaction", 1},
   order_ranges =
      {"Number of SELECT ORDER BY queries per transaction", 1},
   distinct_ranges =
      {"Number of SELECT DISTINCT queries per transaction", 1},
   range_selects =
      {"Enable/disable all range SELECT queries", true},
   skip_trx =
      {"Don't start explicit transactions and execute all queries " ..
          "in the AUTOCOMMIT mode", false},
}

local t = sysbench.sql.type
local stmt_defs = {
   point_selects = {
      "SELECT c FROM %s WHERE id=?",
      t.INT},
   simple_ranges = {
      "SELECT c FROM %s WHERE id BETWEEN ? AND ?",
      t.INT, t.INT},
   sum_ranges = {
      "SELECT SUM(k) FROM %s WHERE id BETWEEN ? AND ?",
      t.INT, t.INT},
   order_ranges = {
      "SELECT c FROM %s WHERE id BETWEEN ? AND ? ORDER BY c",
      t.INT, t.INT},
   distinct_ranges = {
      "SELECT DISTINCT c FROM %s WHERE id BETWEEN ? AND ? ORDER BY c",
      t.INT, t.INT},
}
local range_keys = {"simple_ranges", "sum_ranges", "order_ranges", "distinct_ranges"}

-- part_name(3, 2) = "sbtest3_0002", as kingshard names subtables.
local function part_name(tnum, part)
   return string.format("sbtest%d_%04d", tnum, part)
end

local function check_options()
   local o = sysbench.opt
   if o.split_test ~= "oltp_read_only" and o.split_test ~= "oltp_point_select" then
      error("--split-test must be oltp_read_only or oltp_point_select, got '" ..
               tostring(o.split_test) .. "'")
   end
   if o.parts < 1 or o.parts ~= math.floor(o.parts) then
      error("--parts must be a positive integer, got " .. tostring(o.parts))
   end
end

local function point_only()
   return sysbench.opt.split_test == "oltp_point_select"
end

-- stmt[tnum][key][part+1] and param[tnum][key][part+1][n], like oltp_common's
-- stmt[tnum][key] and param[tnum][key][n] with one more level for the part.
local function prepare_for_each_part(key)
   local def = stmt_defs[key]
   local nparam = #def - 1
   for tnum = 1, sysbench.opt.tables do
      stmt[tnum][key] = {}
      param[tnum][key] = {}
      for part = 0, sysbench.opt.parts - 1 do
         local s = con:prepare(string.format(def[1], part_name(tnum, part)))
         local ps = {}
         for p = 1, nparam do
            ps[p] = s:bind_create(def[p + 1])
         end
         if nparam > 0 then
            s:bind_param(unpack(ps))
         end
         stmt[tnum][key][part + 1] = s
         param[tnum][key][part + 1] = ps
      end
   end
end

function prepare_statements()
   if point_only() then
      -- As oltp_point_select: one query per event, no transaction.
      sysbench.opt.point_selects = 1
      prepare_for_each_part("point_selects")
      return
   end

   prepare_for_each_part("point_selects")

   if not sysbench.opt.skip_trx then
      stmt.begin = con:prepare("BEGIN")
      stmt.commit = con:prepare("COMMIT")
   end

   if sysbench.opt.range_selects then
      for _, key in ipairs(range_keys) do
         prepare_for_each_part(key)
      end
   end
end

function thread_init()
   check_options()
   drv = sysbench.sql.driver()
   con = drv:connect()

   stmt = {}
   param = {}
   for tnum = 1, sysbench.opt.tables do
      stmt[tnum] = {}
      param[tnum] = {}
   end

   prepare_statements()
end

function close_statements()
   for tnum = 1, sysbench.opt.tables do
      for _, parts in pairs(stmt[tnum]) do
         for _, s in ipairs(parts) do
            s:close()
         end
      end
      stmt[tnum] = {}
      param[tnum] = {}
   end
   if stmt.begin ~= nil then
      stmt.begin:close()
      stmt.begin = nil
   end
   if stmt.commit ~= nil then
      stmt.commit:close()
      stmt.commit = nil
   end
end

function thread_done()
   close_statements()
   con:disconnect()
end

local function get_table_num()
   return sysbench.rand.uniform(1, sysbench.opt.tables)
end

local function get_id()
   return sysbench.rand.default(1, sysbench.opt.table_size)
end

local function execute_point_selects()
   local tnum = get_table_num()
   local parts = sysbench.opt.parts

   for i = 1, sysbench.opt.point_selects do
      local id = get_id()
      local part = id % parts + 1

      param[tnum].point_selects[part][1]:set(id)
      stmt[tnum].point_selects[part]:execute()
   end
end

-- execute_range runs each range query on every part, in part order.
local function execute_range(key)
   local tnum = get_table_num()
   local ss, ps = stmt[tnum][key], param[tnum][key]

   for i = 1, sysbench.opt[key] do
      local id = get_id()

      for part = 1, sysbench.opt.parts do
         ps[part][1]:set(id)
         ps[part][2]:set(id + sysbench.opt.range_size - 1)
         ss[part]:execute()
      end
   end
end

function event()
   if point_only() then
      execute_point_selects()
      return
   end

   if not sysbench.opt.skip_trx then
      stmt.begin:execute()
   end

   execute_point_selects()

   if sysbench.opt.range_selects then
      for _, key in ipairs(range_keys) do
         execute_range(key)
      end
   end

   if not sysbench.opt.skip_trx then
      stmt.commit:execute()
   end
end

-- Re-prepare statements after a reconnect, as oltp_common.lua does.
function sysbench.hooks.before_restart_event(errdesc)
   if errdesc.sql_errno == 2013 or -- CR_SERVER_LOST
      errdesc.sql_errno == 2055 or -- CR_SERVER_LOST_EXTENDED
      errdesc.sql_errno == 2006 or -- CR_SERVER_GONE_ERROR
      errdesc.sql_errno == 2011    -- CR_TCP_CONNECTION
   then
      close_statements()
      prepare_statements()
   end
end
