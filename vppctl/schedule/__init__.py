"""Pipeline schedules: the simulator (`simulate`) and its pictures (`timeline`).

A side product of the engine: it needs no program, only stage and chunk counts
and a cost per virtual stage (which `vppctl.engine.cost` can derive from a program).
"""
