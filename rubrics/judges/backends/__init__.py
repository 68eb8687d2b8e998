"""The judges that score prompts on a model, each on `rubrics.judges.backend.JudgeBackend`, and the ones that do not.

    embedded.py     the in-process engine (judge_engine)
    openai.py       any OpenAI-compatible server, over openai_http.py (httpx)
    none.py         no judge: every judge item reported unjudged
"""
