def gst_for(amount, category):
    return 0.0 if category == "exempt" else round(amount * 0.18, 2)
