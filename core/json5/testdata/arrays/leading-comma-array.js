[
    ,null
]