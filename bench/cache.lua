#!/usr/bin/env sysbench
-- bench/cache.lua: point selects with a share of updates mixed in, for
-- bench/cache.sh's "mixed" workload (issue 39: the result cache under writes).
-- Each event is one statement, without BEGIN/COMMIT: with probability
-- update_pct/100 sysbench's oltp_update_index statement
--   UPDATE sbtestN SET k=k+1 WHERE id=?
-- else oltp_point_select's
--   SELECT c FROM sbtestN WHERE id=?
-- ids drawn with sysbench.rand.default (--rand-type), tables at random as
-- oltp_common does. Statements are prepared with con:prepare, so
-- --db-ps-mode=disable sends them as text and auto as binary.

sysbench.cmdline.options = {
	table_size = {"Number of rows per table", 10000},
	tables = {"Number of tables", 1},
	update_pct = {"Percent of statements that are UPDATEs", 5},
}

function thread_init()
	drv = sysbench.sql.driver()
	con = drv:connect()
	sel, upd, sel_id, upd_id = {}, {}, {}, {}
	for t = 1, sysbench.opt.tables do
		sel[t] = con:prepare(string.format("SELECT c FROM sbtest%d WHERE id=?", t))
		upd[t] = con:prepare(string.format("UPDATE sbtest%d SET k=k+1 WHERE id=?", t))
		sel_id[t] = sel[t]:bind_create(sysbench.sql.type.INT)
		upd_id[t] = upd[t]:bind_create(sysbench.sql.type.INT)
		sel[t]:bind_param(sel_id[t])
		upd[t]:bind_param(upd_id[t])
	end
	share = sysbench.opt.update_pct / 100
end

function thread_done()
	for t = 1, sysbench.opt.tables do
		sel[t]:close()
		upd[t]:close()
	end
	con:disconnect()
end

function event()
	local t = sysbench.rand.uniform(1, sysbench.opt.tables)
	local s, id = sel[t], sel_id[t]
	if sysbench.rand.uniform_double() < share then
		s, id = upd[t], upd_id[t]
	end
	id:set(sysbench.rand.default(1, sysbench.opt.table_size))
	s:execute()
end
