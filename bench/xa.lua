#!/usr/bin/env sysbench
-- bench/xa.lua: one write transaction per event, for bench/xa.sh (the cost of
-- transaction_mode: xa against multi).
--
--   BEGIN;
--   UPDATE sbtest1 SET k=k+1 WHERE id=?;
--   UPDATE sbtest1 SET k=k+1 WHERE id=?;
--   COMMIT
--
-- through a proxy that hash-shards sbtest1 on id as etc/ks.yaml does: row id
-- lives in subtable id % xa_subtables (kingshard's hash rule for integer
-- keys), subtables 0 .. xa_node1_subtables-1 on node1 and the rest on node2
-- (locations: [2, 2] = subtables 0,1 on node1, 2,3 on node2).
--
--   --xa-nodes=two  the first id lives on node1, the second on node2: the
--                   transaction reaches both nodes (xa: XA PREPARE on each, the
--                   decision in the sidecar, XA COMMIT on each; multi: COMMIT on
--                   node1, then on node2);
--   --xa-nodes=one  both ids live on the same node, node1 or node2 at random
--                   per event (xa: XA COMMIT ... ONE PHASE; multi: COMMIT).
--
-- Ids are drawn uniformly over 1..table_size (sysbench.rand.uniform), so
-- threads rarely touch the same row. Locks are always taken in one order (the
-- node1 row before the node2 row; on one node the smaller id first), so no
-- two events can deadlock, in particular not across nodes, where neither
-- server would detect it and only innodb_lock_wait_timeout would end it.
--
--   sysbench bench/xa.lua --mysql-host=127.0.0.1 --mysql-port=9696 \
--     --mysql-user=shardgate --mysql-password=shardgate --mysql-db=sbtest \
--     --xa-nodes=two --threads=16 --time=15 run
--
-- The table is loaded with sysbench's own prepare (oltp_read_write
-- --auto-inc=off --tables=1) through the proxy; this script only runs.

if sysbench.cmdline.command == nil then
   error("Command is required. Supported commands: run, help")
end

sysbench.cmdline.options = {
   xa_nodes =
      {"Nodes each transaction reaches: two (one row on node1, one on " ..
          "node2) or one (both rows on the same node)", "two"},
   xa_subtables =
      {"Subtables of sbtest1 in the shard rule (row id in subtable " ..
          "id % xa_subtables)", 4},
   xa_node1_subtables =
      {"Subtables on node1 (the first of locations); the rest are on node2", 2},
   table_size =
      {"Number of rows in sbtest1 (ids 1..table_size)", 10000},
   skip_trx =
      {"Don't send BEGIN/COMMIT (autocommit: each UPDATE commits alone)", false},
}

local function check_options()
   local o = sysbench.opt
   if o.xa_nodes ~= "one" and o.xa_nodes ~= "two" then
      error("--xa-nodes must be one or two, got '" .. tostring(o.xa_nodes) .. "'")
   end
   if o.xa_subtables < 2 or o.xa_subtables ~= math.floor(o.xa_subtables) then
      error("--xa-subtables must be an integer >= 2, got " .. tostring(o.xa_subtables))
   end
   if o.xa_node1_subtables < 1 or o.xa_node1_subtables >= o.xa_subtables or
      o.xa_node1_subtables ~= math.floor(o.xa_node1_subtables) then
      error("--xa-node1-subtables must be an integer from 1 to xa_subtables-1, got " ..
               tostring(o.xa_node1_subtables))
   end
   -- Each subtable must hold at least two rows (two distinct ids on one node).
   if o.table_size < 2 * o.xa_subtables then
      error("--table-size must be at least 2 * xa_subtables")
   end
end

-- id_on(node): a random id in 1..table_size whose subtable is on node (1 or 2).
local function id_on(node)
   local o = sysbench.opt
   local n, n1 = o.xa_subtables, o.xa_node1_subtables
   local s
   if node == 1 then
      s = sysbench.rand.uniform(0, n1 - 1)
   else
      s = sysbench.rand.uniform(n1, n - 1)
   end
   -- id = q * n + s within 1..table_size (id 0 does not exist).
   local qmin = 0
   if s == 0 then
      qmin = 1
   end
   local qmax = math.floor((o.table_size - s) / n)
   return sysbench.rand.uniform(qmin, qmax) * n + s
end

local function prepare_statements()
   upd = con:prepare("UPDATE sbtest1 SET k=k+1 WHERE id=?")
   upd_id = upd:bind_create(sysbench.sql.type.INT)
   upd:bind_param(upd_id)
end

local function close_statements()
   if upd ~= nil then
      upd:close()
      upd = nil
   end
end

function thread_init()
   check_options()
   drv = sysbench.sql.driver()
   con = drv:connect()
   prepare_statements()
end

function thread_done()
   close_statements()
   con:disconnect()
end

local function update(id)
   upd_id:set(id)
   upd:execute()
end

function event()
   local a, b
   if sysbench.opt.xa_nodes == "two" then
      a, b = id_on(1), id_on(2)
   else
      local node = sysbench.rand.uniform(1, 2)
      a = id_on(node)
      repeat
         b = id_on(node)
      until b ~= a
      if b < a then
         a, b = b, a
      end
   end

   if not sysbench.opt.skip_trx then
      con:query("BEGIN")
   end
   update(a)
   update(b)
   if not sysbench.opt.skip_trx then
      con:query("COMMIT")
   end
end

-- An ignored error (sysbench's --mysql-ignore-errors, by default deadlocks and
-- lock wait timeouts) restarts the event: roll back what it left open first.
-- After a reconnect, prepare the statement again, as oltp_common.lua does.
function sysbench.hooks.before_restart_event(errdesc)
   if errdesc.sql_errno == 2013 or -- CR_SERVER_LOST
      errdesc.sql_errno == 2055 or -- CR_SERVER_LOST_EXTENDED
      errdesc.sql_errno == 2006 or -- CR_SERVER_GONE_ERROR
      errdesc.sql_errno == 2011    -- CR_TCP_CONNECTION
   then
      close_statements()
      prepare_statements()
   elseif not sysbench.opt.skip_trx then
      pcall(con.query, con, "ROLLBACK")
   end
end
