"""The stop words of PostgreSQL's full-text configurations ``portuguese``, ``english`` and ``spanish`` (Snowball's
lists, as PostgreSQL 15 ships them in ``tsearch_data/*.stop``), folded (case and accents aside), the words of four
letters or more only: shorter words never tell what a question is about (:mod:`agents.passages`). The search on
PostgreSQL drops them already; the relevance bar, the same on every engine, drops them here."""

from __future__ import annotations

PORTUGUESE = """
    aquela aquelas aquele aqueles aquilo como dela delas dele deles depois elas eles entre eram eramos essa
    essas esse esses esta estamos estao estas estava estavam estavamos este esteja estejam estejamos estes
    esteve estive estivemos estiver estivera estiveram estiveramos estiverem estivermos estivesse estivessem
    estivessemos estou fomos fora foram foramos forem formos fosse fossem fossemos haja hajam hajamos havemos
    houve houvemos houver houvera houveram houveramos houverao houverei houverem houveremos houveria houveriam
    houveriamos houvermos houvesse houvessem houvessemos isso isto lhes mais mesmo meus minha minhas muito
    nossa nossas nosso nossos numa para pela pelas pelo pelos qual quando quem seja sejam sejamos sera serao
    serei seremos seria seriam seriamos seus somos suas tambem temos tenha tenham tenhamos tenho tera terao
    terei teremos teria teriam teriamos teus teve tinha tinham tinhamos tive tivemos tiver tivera tiveram
    tiveramos tiverem tivermos tivesse tivessem tivessemos tuas voce voces
"""

ENGLISH = """
    about above after again against because been before being below between both does doing down during each
    from further have having here hers herself himself into itself just more most myself once only other ours
    ourselves over same should some such than that their theirs them themselves then there these they this
    those through under until very were what when where which while whom will with your yours yourself
    yourselves
"""

SPANISH = """
    algo algunas algunos ante antes como contra cual cuando desde donde durante ella ellas ellos entre erais
    eramos eran eras eres esas esos esta estaba estabais estabamos estaban estabas estad estada estadas estado
    estados estais estamos estan estando estar estara estaran estaras estare estareis estaremos estaria
    estariais estariamos estarian estarias estas este esteis estemos esten estes esto estos estoy estuve
    estuviera estuvierais estuvieramos estuvieran estuvieras estuvieron estuviese estuvieseis estuviesemos
    estuviesen estuvieses estuvimos estuviste estuvisteis estuvo fuera fuerais fueramos fueran fueras fueron
    fuese fueseis fuesemos fuesen fueses fuimos fuiste fuisteis habeis habia habiais habiamos habian habias
    habida habidas habido habidos habiendo habra habran habras habre habreis habremos habria habriais
    habriamos habrian habrias hasta haya hayais hayamos hayan hayas hemos hube hubiera hubierais hubieramos
    hubieran hubieras hubieron hubiese hubieseis hubiesemos hubiesen hubieses hubimos hubiste hubisteis hubo
    mias mios mucho muchos nada nosotras nosotros nuestra nuestras nuestro nuestros otra otras otro otros para
    pero poco porque quien quienes seais seamos sean seas sentid sentida sentidas sentido sentidos sera seran
    seras sere sereis seremos seria seriais seriamos serian serias siente sintiendo sobre sois somos suya
    suyas suyo suyos tambien tanto tendra tendran tendras tendre tendreis tendremos tendria tendriais
    tendriamos tendrian tendrias tened teneis tenemos tenga tengais tengamos tengan tengas tengo tenia teniais
    teniamos tenian tenias tenida tenidas tenido tenidos teniendo tiene tienen tienes todo todos tuve tuviera
    tuvierais tuvieramos tuvieran tuvieras tuvieron tuviese tuvieseis tuviesemos tuviesen tuvieses tuvimos
    tuviste tuvisteis tuvo tuya tuyas tuyo tuyos unos vosostras vosostros vuestra vuestras vuestro vuestros
"""

STOP_WORDS = frozenset((PORTUGUESE + ENGLISH + SPANISH).split())
# The same lists' words of three letters, folded: a question's word of three letters counts where a passage found
# holds it (agents.passages.short_words), but never one of these.
SHORT = """
    aos ate com das dos ela ele era foi for fui hao hei lhe mas meu nao nas nem nos num por que sao sem seu sou sua
    tem teu tua uma vos
    all and any are but can did don few for had has her him his how its nor not now off our out own she the too was
    who why you
    con del era esa ese eso fue fui han has hay las les los mas mia mio mis muy nos por que sea sin son soy sus tus
    una uno
"""
SHORT_STOP_WORDS = frozenset(SHORT.split())
