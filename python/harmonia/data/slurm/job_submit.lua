--[[
Harmonia's check of burst-buffer directives at submission (docs/slurm.md), for slurm.conf's
JobSubmitPlugins=lua.

Slurm's burst_buffer/lua refuses capacity=0, an unknown pool or an unreadable size before
burst_buffer.lua sees the job, telling the user only "Burst Buffer request invalid", and it
ignores DataWarp's #DW lines (the job would run without buffers). slurmctld runs this file
first: it translates each #DW line of the script into its #BB_LUA line and refuses a bad
directive with a message sbatch prints, all in this process (no program is started).

Install beside slurm.conf with harmonia_bb.lua and harmonia-bb.json. A site with a
job_submit.lua of its own installs this one as harmonia_job_submit.lua beside it, dofile()s it
and calls harmonia_job_submit(job_desc) from its own slurm_job_submit (this file defines
slurm_job_submit only where none is defined yet).
--]]

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."

function harmonia_job_submit(job_desc)
	local script = job_desc.script
	if script == nil or script == "" then
		return slurm.SUCCESS
	end
	local loaded, harmonia = pcall(dofile, HERE .. "/harmonia_bb.lua")
	if not loaded then
		slurm.log_error("harmonia job_submit: harmonia_bb.lua: %s", tostring(harmonia))
		return slurm.SUCCESS -- burst_buffer.lua refuses the job's directives with the reason
	end
	if not harmonia.mentions_directives(script) then
		return slurm.SUCCESS
	end
	local ok, result = harmonia.try(function()
		return harmonia.check_submission(script, harmonia.read_config(HERE .. "/harmonia-bb.json"))
	end)
	if not ok then
		slurm.user_msg("Harmonia burst buffer: " .. result)
		return slurm.ERROR
	end
	if result then
		job_desc.script = result
	end
	return slurm.SUCCESS
end

if slurm_job_submit == nil then
	function slurm_job_submit(job_desc, part_list, submit_uid)
		return harmonia_job_submit(job_desc)
	end
end

if slurm_job_modify == nil then
	function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
		return slurm.SUCCESS
	end
end
