
{
    print = print,
    type = type,
    tostring = tostring,
    tonumber = tonumber,
    table = { insert = table.insert, concat = table.concat },
    string = { sub = string.sub, len = string.len },
    math = math,
    -- NO: os, io, debug, dofile, loadfile, require
}
