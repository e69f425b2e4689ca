--[[
Harmonia's burst-buffer directives, read inside slurmctld (docs/slurm.md).

burst_buffer.lua and job_submit.lua load this file from beside them. It reads a job script's
#BB_LUA directives, translates DataWarp's #DW ones to them, checks both, and computes what
slurmctld's synchronous hooks answer (job_process, pools, paths) without starting any program:
slurmctld runs those hooks holding its locks and cannot kill them. Needs lua-posix (stat, for
the paths a job names) and lua-cjson (harmonia-bb.json), Debian's lua-posix and lua-cjson.
--]]

local cjson = require("cjson")
local stat = require("posix.sys.stat")

local M = {}

M.DIRECTIVE = "#BB_LUA"
local DATAWARP = "#DW"
local BB_VARIABLE = "$HARMONIA_BB"
local DW_STRIPED = "$DW_JOB_STRIPED"
local DW_PRIVATE = "$DW_JOB_PRIVATE"
local JOBDW_KEYS = { "pool", "capacity", "io", "access", "priority", "hint", "node_agent" }
local STAGE_KEYS = { "source", "destination", "type" }
local DW_JOBDW_KEYS = { "capacity", "access_mode", "type", "pool" }
local CONFIG_KEYS = { "pool", "mode", "buffers", "capacity", "schedd", "pfs", "jobs", "state",
	"libharmonia", "python" }
-- Sizes as Slurm's burst-buffer plugins read them (suffix_mult): K, M, G, T, P and KiB..PiB
-- binary, KB..PB decimal, case ignored.
local UNITS = { [""] = 1, k = 2 ^ 10, kib = 2 ^ 10, kb = 1e3, m = 2 ^ 20, mib = 2 ^ 20, mb = 1e6,
	g = 2 ^ 30, gib = 2 ^ 30, gb = 1e9, t = 2 ^ 40, tib = 2 ^ 40, tb = 1e12, p = 2 ^ 50,
	pib = 2 ^ 50, pb = 1e15 }
-- Lua's numbers hold whole numbers exactly below 2^53 (8 PiB): a larger size is refused, never
-- rounded (Slurm's own reading wraps past 2^64, e.g. 16777217T is 1T to it).
local LARGEST = 2 ^ 53

-- A refusal: the message Slurm shows the user, raised through pcall.
local function refuse(message)
	error({ message = message }, 0)
end

local function listed(value, list)
	for _, item in ipairs(list) do
		if item == value then
			return true
		end
	end
	return false
end

-- Runs fn(...) and returns true and its results, or false and the refusal's message.
function M.try(fn, ...)
	local results = { pcall(fn, ...) }
	if results[1] then
		return unpack(results)
	end
	local problem = results[2]
	if type(problem) == "table" and problem.message then
		return false, problem.message
	end
	return false, "harmonia: " .. tostring(problem)
end

-- The file at `path`, read; a refusal says what it is for (`what`) and why not.
local function read_file(path, what)
	local file, why = io.open(path, "r")
	if not file then
		refuse("cannot read " .. what .. ": " .. why)
	end
	local text = file:read("*a")
	file:close()
	return text
end

-- The configuration the hooks share with harmonia.slurm_bb (harmonia-bb.json).
function M.read_config(path)
	local text = read_file(path, "Harmonia's burst-buffer configuration")
	local ok, config = pcall(cjson.decode, text)
	if not ok or type(config) ~= "table" then
		refuse(path .. ": not a JSON object: " .. tostring(config))
	end
	for _, key in ipairs(CONFIG_KEYS) do
		if config[key] == nil then
			refuse(path .. ": missing key " .. key)
		end
	end
	return config
end

-- Bytes, as Slurm reads capacity=: digits with an optional unit.
function M.parse_size(text)
	if text:sub(1, 1) == "-" then
		return nil, "must not be negative"
	end
	local digits, unit = text:match("^(%d+)(%a*)$")
	if not digits then
		return nil, "is not a size (e.g. 512M, 2G, 1048576)"
	end
	local multiplier = UNITS[unit:lower()]
	if not multiplier then
		return nil, "unknown unit " .. unit .. " (K, M, G, T, P or KiB..PiB: binary; KB..PB: decimal)"
	end
	local significant = digits:gsub("^0+", "")
	local size = tonumber(digits) * multiplier
	if #significant > 16 or size >= LARGEST then
		return nil, "too large (at most 8 PiB)"
	end
	return size
end

-- "%d" of a whole number (tostring would write 2^50 as 1.1258999068426e+15).
function M.whole(number)
	return string.format("%d", number)
end

-- The script's lines up to its first command, as Slurm reads burst-buffer directives: stops at
-- the first non-empty line not starting with '#'. Each entry: number, text.
local function heading_lines(script)
	local lines = {}
	local number = 0
	for text in (script .. "\n"):gmatch("([^\n]*)\n") do
		number = number + 1
		text = text:gsub("\r$", "")
		if text ~= "" then
			if text:sub(1, 1) ~= "#" then
				break
			end
			lines[#lines + 1] = { number = number, text = text }
		end
	end
	return lines
end

-- What follows `prefix` when `text` is that directive ("#BB_LUA jobdw ..." -> "jobdw ..."), else
-- nil. Slurm takes any line starting with "#BB_LUA" as one, so "#BB_LUAx" is refused here.
local function directive_body(text, prefix, where)
	if text:sub(1, #prefix) ~= prefix then
		return nil
	end
	local rest = text:sub(#prefix + 1)
	if rest ~= "" and not rest:match("^%s") then
		if prefix == DATAWARP then
			return nil -- a comment such as "#DWARF", not DataWarp's
		end
		refuse(where .. ": expected a space after " .. prefix)
	end
	return rest
end

-- verb and {key = value} of "verb key=value ...", refusing malformed and repeated keys.
local function words_of(body, where, expected)
	local words = {}
	for word in body:gmatch("%S+") do
		words[#words + 1] = word
	end
	if #words == 0 then
		refuse(where .. ": expected " .. expected)
	end
	local pairs_ = {}
	for i = 2, #words do
		local key, value = words[i]:match("^([^=]*)=(.*)$")
		if not key or key == "" or value == "" then
			refuse(where .. ": '" .. words[i] .. "': expected key=value")
		end
		if pairs_[key] ~= nil then
			refuse(where .. ": " .. key .. " given twice")
		end
		pairs_[key] = value
	end
	return words[1], pairs_
end

local function unknown_keys(pairs_, known)
	for key in pairs(pairs_) do
		if not listed(key, known) then
			refuse("unknown key '" .. key .. "' (expected " .. table.concat(known, ", ") .. ")")
		end
	end
end

-- DataWarp ---------------------------------------------------------------------------------------

-- DataWarp's $DW_JOB_STRIPED/... as $HARMONIA_BB/...; other variables are left for the checks.
local function from_datawarp_path(path)
	if path:sub(1, #DW_PRIVATE) == DW_PRIVATE then
		refuse(path .. ": private (per compute node) buffers are not offered; use " .. DW_STRIPED)
	end
	if path == DW_STRIPED or path:sub(1, #DW_STRIPED + 1) == DW_STRIPED .. "/" then
		return BB_VARIABLE .. path:sub(#DW_STRIPED + 1)
	end
	return path
end

-- The #BB_LUA body for a #DW body (docs/slurm.md has the table), or a refusal.
local function translate_body(body, config, where)
	local first = body:match("%S+")
	if first == "persistentdw" or first == "create_persistent" or first == "destroy_persistent" then
		refuse(where .. ": " .. first .. ": persistent buffers are not offered; a job's buffer is "
			.. "#DW jobdw")
	elseif first == "swap" then
		refuse(where .. ": swap: swap space on the buffers is not offered")
	end
	local verb, given = words_of(body, where, "jobdw, stage_in or stage_out")
	local function line(...)
		return table.concat({ ... }, " ")
	end
	local ok, result = M.try(function()
		if verb == "jobdw" then
			unknown_keys(given, DW_JOBDW_KEYS)
			if not given.capacity then
				refuse("capacity=SIZE is required")
			end
			local kind = given.type or "scratch"
			if kind ~= "scratch" then
				refuse("type=" .. kind .. ": only type=scratch (a job's own buffer) is offered")
			end
			local pool = given.pool or config.pool
			if pool ~= config.pool then
				refuse("pool=" .. pool .. ": the only pool is " .. config.pool)
			end
			-- access_mode=private or striped,private is refused as access= is.
			return line("jobdw", "pool=" .. pool, "capacity=" .. given.capacity,
				"access=" .. (given.access_mode or "striped"))
		elseif verb == "stage_in" or verb == "stage_out" then
			unknown_keys(given, STAGE_KEYS)
			local kind = given.type or "file"
			if kind == "list" then
				refuse("type=list is not offered: one " .. verb .. " line per file or directory")
			end
			local parts = { verb }
			for _, key in ipairs({ "source", "destination" }) do
				if given[key] then
					parts[#parts + 1] = key .. "=" .. from_datawarp_path(given[key])
				end
			end
			parts[#parts + 1] = "type=" .. kind
			return line(unpack(parts))
		end
		refuse("unknown directive '" .. verb .. "' (expected jobdw, stage_in, stage_out)")
	end)
	if not ok then
		refuse(where .. ": " .. result)
	end
	return result
end

-- The script with each #DW line before its first command replaced by its #BB_LUA line (line
-- numbers kept), whether any was, and the original text of each translated line by number.
function M.translate(script, config)
	local originals = {}
	local replace = {}
	for _, entry in ipairs(heading_lines(script)) do
		local where = "line " .. entry.number .. ": " .. entry.text
		local body = directive_body(entry.text, DATAWARP, where)
		if body then
			replace[entry.number] = M.DIRECTIVE .. " " .. translate_body(body, config, where)
			originals[entry.number] = entry.text
		end
	end
	if next(replace) == nil then
		return script, false, originals
	end
	local out = {}
	local number = 0
	for text in (script .. "\n"):gmatch("([^\n]*)\n") do
		number = number + 1
		out[#out + 1] = replace[number] or text
	end
	out[#out] = nil -- the "\n" appended above
	return table.concat(out, "\n"), true, originals
end

-- #BB_LUA ----------------------------------------------------------------------------------------

-- "$HARMONIA_BB/a/b" -> "a/b", refusing anything but a plain relative path in the job's space.
function M.inside_bb(path, key)
	if path:sub(1, #BB_VARIABLE + 1) ~= BB_VARIABLE .. "/" then
		refuse(key .. "=" .. path .. ": must be inside the job's buffers, " .. BB_VARIABLE .. "/...")
	end
	local relative = path:sub(#BB_VARIABLE + 2):gsub("^/+", ""):gsub("/+$", "")
	local plain = relative ~= ""
	for part in (relative .. "/"):gmatch("([^/]*)/") do
		if part == "" or part == "." or part == ".." then
			plain = false
		end
	end
	if not plain then
		refuse(key .. "=" .. path .. ": needs a plain relative path after " .. BB_VARIABLE .. "/")
	end
	return relative
end

-- "file", "directory" or "other" for what `path` names (links followed, as the copier opens
-- it), or nil and why not.
local function kind_of(path)
	local info, why, errno = stat.stat(path)
	if not info then
		return nil, errno == 2 and "no such file or directory" or why:gsub("^.-: ", "")
	end
	if stat.S_ISREG(info.st_mode) ~= 0 then
		return "file"
	elseif stat.S_ISDIR(info.st_mode) ~= 0 then
		return "directory"
	end
	return "other"
end

local function jobdw(request, given, config)
	unknown_keys(given, JOBDW_KEYS)
	-- DataWarp reserves for the whole job, so it needs the capacity; Harmonia's policies grant
	-- phases as they come, so there a job may only declare its output (io=) and Slurm then holds
	-- none of the pool for it.
	if not given.capacity and (config.mode == "datawarp" or not given.io) then
		refuse("capacity=SIZE is required " .. (config.mode == "datawarp" and "in DataWarp mode"
			or "(or io=SIZE)"))
	end
	local total = config.capacity * config.buffers
	for _, key in ipairs({ "capacity", "io" }) do
		local text = given[key]
		if text then
			local size, why = M.parse_size(text)
			if not size then
				refuse(key .. "=" .. text .. ": " .. why)
			elseif size <= 0 then
				refuse(key .. "=" .. text .. ": must be more than 0 bytes")
			elseif key == "capacity" and size > total then
				refuse(key .. "=" .. text .. ": more than the " .. M.whole(total)
					.. " bytes all buffer nodes hold")
			end
			request[key] = size
		end
	end
	request.pool = given.pool or ""
	if request.capacity > 0 and request.pool ~= config.pool then
		refuse("pool=" .. (given.pool or "(missing)") .. ": expected pool=" .. config.pool)
	end
	if request.capacity == 0 and given.pool then
		refuse("pool= needs capacity=SIZE (Slurm accounts a pool by capacity)")
	end
	local access = given.access or "striped"
	if access ~= "striped" then
		refuse("access=" .. access .. ": only striped (one namespace shared by the job's nodes) "
			.. "is offered")
	end
	local priority = given.priority or "0"
	if not priority:match("^[-+]?%d+$") then
		refuse("priority=" .. priority .. ": expected an integer")
	end
	request.priority = tonumber(priority)
	if request.priority < -1000000 or request.priority > 1000000 then
		refuse("priority=" .. priority .. ": expected -1000000 to 1000000")
	end
	request.hint = given.hint or "flushable"
	if request.hint ~= "cached" and request.hint ~= "flushable" then
		refuse("hint=" .. request.hint .. ": expected cached or flushable")
	end
	local agent = given.node_agent or "no"
	if agent ~= "yes" and agent ~= "no" then
		refuse("node_agent=" .. agent .. ": expected yes or no")
	end
	request.node_agent = agent == "yes"
end

local function stage(request, verb, given)
	unknown_keys(given, STAGE_KEYS)
	for _, key in ipairs({ "source", "destination" }) do
		if not given[key] then
			refuse(key .. "=PATH is required")
		end
		local rest = given[key]
		if rest:sub(1, #BB_VARIABLE + 1) == BB_VARIABLE .. "/" then
			rest = rest:sub(#BB_VARIABLE + 2)
		end
		if rest:find("$", 1, true) then
			refuse(key .. "=" .. given[key] .. ": variables are not expanded here (only a leading "
				.. BB_VARIABLE .. "/)")
		end
	end
	local kind = given.type or "file"
	if kind ~= "file" and kind ~= "directory" then
		refuse("type=" .. kind .. ": expected file or directory")
	end
	local source, destination = given.source, given.destination
	if verb == "stage_in" then
		if source:sub(1, 1) ~= "/" then
			refuse("source=" .. source .. ": must be an absolute path")
		end
		local found, why = kind_of(source)
		if not found then
			refuse("source=" .. source .. ": " .. why)
		elseif found == "directory" and kind == "file" then
			refuse("source=" .. source .. ": is a directory (add type=directory)")
		elseif found == "file" and kind == "directory" then
			refuse("source=" .. source .. ": is a file, not a directory (type=file)")
		elseif found == "other" then
			refuse("source=" .. source .. ": not a regular file or directory")
		end
		M.inside_bb(destination, "destination")
	else
		if destination:sub(1, 1) ~= "/" then
			refuse("destination=" .. destination .. ": must be an absolute path")
		end
		local parent = destination:gsub("/+$", ""):match("^(.*)/[^/]*$")
		if kind_of(parent == "" and "/" or parent) ~= "directory" then
			refuse("destination=" .. destination .. ": its directory does not exist")
		end
		M.inside_bb(source, "source")
	end
	local list = request[verb] -- stage_in or stage_out
	list[#list + 1] = { source = source, destination = destination, type = kind }
end

-- The job's request from its script's #BB_LUA lines, or a refusal naming the line and the key.
-- `originals` (from translate) names a translated line by the #DW text the user wrote.
function M.parse(script, config, originals)
	local request = { capacity = 0, io = 0, pool = "", priority = 0, hint = "flushable",
		access = "striped", node_agent = false, ntasks = 1, stage_in = {}, stage_out = {} }
	local seen_jobdw = false
	local continued = nil
	for _, entry in ipairs(heading_lines(script)) do
		local text = entry.text
		local where = "line " .. entry.number .. ": " .. ((originals or {})[entry.number] or text)
		if text:match("^#SBATCH") then
			local tasks = text:match("%-%-ntasks[= ]+(%d+)") or text:match("%s%-n%s*(%d+)")
			if tasks then
				request.ntasks = math.max(1, tonumber(tasks))
			end
		end
		local body = directive_body(text, M.DIRECTIVE, where)
		if not body and directive_body(text, DATAWARP, where) then
			refuse(where .. ": #DW directives need Harmonia's job_submit.lua "
				.. "(JobSubmitPlugins=lua in slurm.conf, docs/slurm.md)")
		end
		if body then
			-- Slurm joins a line ending in a backslash with the next directive line.
			if continued then
				body = continued .. " " .. body
			end
			if body:match("\\$") then
				continued = body:sub(1, -2)
			else
				continued = nil
				local verb, given = words_of(body, where, "jobdw, stage_in or stage_out")
				local ok, why = M.try(function()
					if verb == "jobdw" then
						if seen_jobdw then
							refuse("a second jobdw: one per job")
						end
						seen_jobdw = true
						jobdw(request, given, config)
					elseif verb == "stage_in" or verb == "stage_out" then
						stage(request, verb, given)
					else
						refuse("unknown directive '" .. verb
							.. "' (expected jobdw, stage_in, stage_out)")
					end
				end)
				if not ok then
					refuse(where .. ": " .. why)
				end
			end
		end
	end
	if (#request.stage_in > 0 or #request.stage_out > 0) and not seen_jobdw then
		refuse(M.DIRECTIVE .. " stage_in/stage_out need a `" .. M.DIRECTIVE .. " jobdw` line")
	end
	return request
end

-- The job script at `path`, read; a refusal names the file.
function M.read_script(path)
	return read_file(path, "the job script")
end

-- The request as JSON for harmonia.slurm_bb: sizes as decimal strings (lua-cjson writes numbers
-- with 14 digits), and an empty stage list as {} (lua-cjson cannot tell it from an object).
function M.request_json(request)
	local copy = {}
	for key, value in pairs(request) do
		copy[key] = value
	end
	copy.capacity, copy.io = M.whole(request.capacity), M.whole(request.io)
	return cjson.encode(copy)
end

-- Whether `script` may hold directives at all (a quick test before reading the settings).
function M.mentions_directives(script)
	return script:find(M.DIRECTIVE, 1, true) ~= nil or script:find(DATAWARP, 1, true) ~= nil
end

-- At submission (job_submit.lua): the script with its #DW lines translated, or nil when it has
-- none, after checking every directive; a refusal is the message sbatch prints.
function M.check_submission(script, config)
	local translated, changed, originals = M.translate(script, config)
	M.parse(translated, config, originals)
	return changed and translated or nil
end

-- The answers slurmctld waits for ---------------------------------------------------------------

-- slurm_bb_pools: one pool, all buffer nodes' capacity, counted in MiB.
function M.pools(config)
	local mib = math.floor(config.capacity * config.buffers / 2 ^ 20)
	return '{"pools":[{"id":' .. cjson.encode(config.pool) .. ',"quantity":' .. M.whole(mib)
		.. ',"granularity":1048576}]}'
end

-- The job's buffer space, $HARMONIA_BB.
function M.job_dir(config, job_id)
	return config.jobs .. "/" .. job_id
end

-- slurm_bb_paths: the job's environment, as {name, value} pairs in a fixed order.
function M.job_env(config, job_id, request)
	local space = M.job_dir(config, job_id)
	local declared = request.io > 0 and request.io or request.capacity
	local env = {
		{ "HARMONIA_BB", space },
		{ "DW_JOB_STRIPED", space }, -- what DataWarp's scripts name the same space
		{ "LD_PRELOAD", config.libharmonia },
		{ "HARMONIA_SCHEDD", config.schedd },
		{ "HARMONIA_BUFFER_ROOT", config.pfs },
		{ "HARMONIA_STAGE_INCLUDE", space },
		{ "HARMONIA_PRIORITY", M.whole(request.priority) },
		{ "HARMONIA_HINT", request.hint },
		-- DataWarp reserves this x ranks for the whole job; Harmonia sizes phases by it.
		{ "HARMONIA_BYTES_PER_PROCESS", M.whole(math.max(1, math.floor(declared / request.ntasks))) },
	}
	if request.node_agent then -- read by the node-agent TaskProlog (harmonia-node-agent.sh)
		env[#env + 1] = { "HARMONIA_NODE_AGENT", "1" }
	end
	return env
end

function M.write_paths(path_file, env)
	local file, why = io.open(path_file, "a")
	if not file then
		refuse("cannot write the job's paths: " .. why)
	end
	for _, pair in ipairs(env) do
		file:write(pair[1], "=", pair[2], "\n")
	end
	file:close()
end

return M
